//! The batch writer: collects rows from many producers into inserts bounded by size and time,
//! retries failed inserts with exponential backoff, and tells every producer exactly which batch
//! carried its rows and whether ClickHouse accepted it.
//!
//! Memory is bounded: at most `max_queued_rows` rows wait at once. [`BatchWriter::submit`] waits
//! for room (backpressure); [`BatchWriter::try_submit`] refuses at once, so an HTTP ingest path
//! can answer 429 instead of growing. A retried insert may reach ClickHouse twice (the first
//! attempt can succeed after its answer was lost); every table's sort key makes such duplicates
//! collapse, and every query reads through them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::rows::Table;
use crate::Store;

#[derive(Debug, Clone)]
pub struct BatchWriterConfig {
    /// A batch is sent once it holds at least this many rows…
    pub max_rows: usize,
    /// …or once its first rows have waited this long…
    pub max_delay: Duration,
    /// …or once no new rows arrived for this long while no insert is running.
    pub linger: Duration,
    /// Attempts per batch before its producers are told it failed.
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Rows that may wait (queued or being written) at once.
    pub max_queued_rows: usize,
    /// When set, this writer stamps each batch's rows with their arrival time
    /// ([`Table::stamp_arrival`]; never earlier than a stamp or horizon it gave before) and
    /// publishes under this name, about once a second, up to when its rows are visible
    /// (`arrival_writers`, migration 4). It publishes once before its first insert; the name
    /// must be unique to this process.
    pub arrival_writer: Option<String>,
}

impl Default for BatchWriterConfig {
    fn default() -> Self {
        BatchWriterConfig {
            max_rows: 100_000,
            max_delay: Duration::from_millis(500),
            linger: Duration::from_millis(10),
            max_attempts: 8,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            max_queued_rows: 1_000_000,
            arrival_writer: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("the writer queue is full ({queued_rows} of {capacity} rows waiting); retry later")]
    Full { queued_rows: usize, capacity: usize },
    #[error("the batch writer has stopped")]
    Closed,
    #[error("batch {batch_id} ({rows} rows into {table}) was not accepted after {attempts} attempts: {error}")]
    Rejected {
        batch_id: u64,
        table: &'static str,
        rows: usize,
        attempts: u32,
        error: String,
    },
}

/// Proof that ClickHouse accepted the batch that carried a producer's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub batch_id: u64,
    pub batch_rows: usize,
    pub attempts: u32,
}

/// What happened to one batch, for whoever watches the writer (metrics, logs, tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    pub table: &'static str,
    pub batch_id: u64,
    pub rows: usize,
    pub submissions: usize,
    pub attempts: u32,
    pub accepted: bool,
    pub elapsed: Duration,
}

/// Counters, read at any time (for example at scrape time).
#[derive(Debug, Default)]
pub struct WriterStats {
    pub batches_accepted: AtomicU64,
    pub rows_accepted: AtomicU64,
    pub batches_failed: AtomicU64,
    pub rows_failed: AtomicU64,
    pub retries: AtomicU64,
}

struct Submission<T> {
    rows: Vec<T>,
    _permit: OwnedSemaphorePermit,
    reply: oneshot::Sender<Result<Receipt, WriteError>>,
}

/// A producer's claim on the outcome of its rows.
#[derive(Debug)]
pub struct Pending(oneshot::Receiver<Result<Receipt, WriteError>>);

impl Pending {
    /// Waits until the batch carrying these rows was accepted or finally failed.
    pub async fn accepted(self) -> Result<Receipt, WriteError> {
        self.0.await.unwrap_or(Err(WriteError::Closed))
    }
}

/// Writes rows of one table. Clone it for every producer; all clones feed one worker task.
#[derive(Debug)]
pub struct BatchWriter<T: Table> {
    tx: Option<mpsc::UnboundedSender<Submission<T>>>,
    room: Arc<Semaphore>,
    capacity: usize,
    stats: Arc<WriterStats>,
    worker: Option<JoinHandle<()>>,
}

impl<T> std::fmt::Debug for Submission<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submission")
            .field("rows", &self.rows.len())
            .finish()
    }
}

impl<T: Table> Clone for BatchWriter<T> {
    fn clone(&self) -> Self {
        BatchWriter {
            tx: self.tx.clone(),
            room: self.room.clone(),
            capacity: self.capacity,
            stats: self.stats.clone(),
            worker: None,
        }
    }
}

impl<T: Table> BatchWriter<T> {
    /// Starts the worker task. `outcomes`, when given, receives one [`BatchOutcome`] per batch.
    pub fn spawn(
        store: Store,
        config: BatchWriterConfig,
        outcomes: Option<mpsc::UnboundedSender<BatchOutcome>>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let capacity = config.max_queued_rows.clamp(1, Semaphore::MAX_PERMITS);
        let stats = Arc::new(WriterStats::default());
        let stats_for_worker = stats.clone();
        let worker = tokio::spawn(async move {
            let clock = match config.arrival_writer.clone() {
                Some(writer) => Some(ArrivalClock::start(store.clone(), writer).await),
                None => None,
            };
            run_worker(store, config, rx, outcomes, stats_for_worker, clock).await
        });
        BatchWriter {
            tx: Some(tx),
            room: Arc::new(Semaphore::new(capacity)),
            capacity,
            stats,
            worker: Some(worker),
        }
    }

    pub fn stats(&self) -> &WriterStats {
        &self.stats
    }

    /// Rows waiting now (queued or being written).
    pub fn queued_rows(&self) -> usize {
        self.capacity - self.room.available_permits()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn permits_for(&self, rows: usize) -> u32 {
        // A submission larger than the whole queue still goes through, alone.
        rows.clamp(1, self.capacity) as u32
    }

    /// Queues `rows`, waiting for room if the queue is full.
    pub async fn submit(&self, rows: Vec<T>) -> Result<Pending, WriteError> {
        let permit = self
            .room
            .clone()
            .acquire_many_owned(self.permits_for(rows.len()))
            .await
            .map_err(|_| WriteError::Closed)?;
        self.enqueue(rows, permit)
    }

    /// Queues `rows` if there is room now; otherwise [`WriteError::Full`].
    pub fn try_submit(&self, rows: Vec<T>) -> Result<Pending, WriteError> {
        let permit = self
            .room
            .clone()
            .try_acquire_many_owned(self.permits_for(rows.len()))
            .map_err(|_| WriteError::Full {
                queued_rows: self.queued_rows(),
                capacity: self.capacity,
            })?;
        self.enqueue(rows, permit)
    }

    fn enqueue(&self, rows: Vec<T>, permit: OwnedSemaphorePermit) -> Result<Pending, WriteError> {
        let (reply, receiver) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or(WriteError::Closed)?;
        tx.send(Submission {
            rows,
            _permit: permit,
            reply,
        })
        .map_err(|_| WriteError::Closed)?;
        Ok(Pending(receiver))
    }

    /// Queues `rows` and waits until ClickHouse accepted them.
    pub async fn write(&self, rows: Vec<T>) -> Result<Receipt, WriteError> {
        self.submit(rows).await?.accepted().await
    }

    /// Stops taking rows, writes everything queued, and waits for the worker. Other clones must
    /// be dropped too before the worker can finish.
    pub async fn close(mut self) {
        self.tx = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.await;
        }
    }
}

async fn run_worker<T: Table>(
    store: Store,
    config: BatchWriterConfig,
    mut rx: mpsc::UnboundedReceiver<Submission<T>>,
    outcomes: Option<mpsc::UnboundedSender<BatchOutcome>>,
    stats: Arc<WriterStats>,
    clock: Option<Arc<ArrivalClock>>,
) {
    let store = Arc::new(store);
    let config = Arc::new(config);
    let mut next_batch_id: u64 = 1;
    // One insert runs while the next batch gathers: batches stay in order, and under load a
    // batch grows for as long as the previous insert takes. `in_flight` says when the insert
    // has ended; its producers may still be waiting for their answer (see `write_batch`).
    let mut in_flight: Option<watch::Receiver<bool>> = None;
    let mut last_write: Option<JoinHandle<()>> = None;
    while let Some(first) = rx.recv().await {
        let opened = tokio::time::Instant::now();
        let deadline = opened + config.max_delay;
        let mut row_count = first.rows.len();
        let mut batch = vec![first];
        let mut last_arrival = opened;
        while row_count < config.max_rows {
            // Flush when the batch is old enough, or when submissions stopped arriving for
            // `linger` and no insert is running (nothing to gain by waiting longer).
            let busy = in_flight
                .as_ref()
                .is_some_and(|inserted| !*inserted.borrow());
            let wake = if busy {
                deadline
            } else {
                deadline.min(last_arrival + config.linger)
            };
            tokio::select! {
                next = rx.recv() => match next {
                    Some(submission) => {
                        row_count += submission.rows.len();
                        batch.push(submission);
                        last_arrival = tokio::time::Instant::now();
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(wake) => {
                    if wake >= deadline || in_flight.as_ref().is_none_or(|inserted| *inserted.borrow()) {
                        break;
                    }
                }
            }
        }
        if let Some(mut previous) = in_flight.take() {
            let _ = previous.wait_for(|inserted| *inserted).await;
        }
        let batch_id = next_batch_id;
        next_batch_id += 1;
        let mut batch = batch;
        let stamped = clock.as_ref().map(|clock| {
            let stamp = clock.stamp_batch();
            for submission in &mut batch {
                for row in &mut submission.rows {
                    row.stamp_arrival(stamp);
                }
            }
            (clock.clone(), stamp)
        });
        let (inserted, inserted_rx) = watch::channel(false);
        in_flight = Some(inserted_rx);
        let write = Write {
            batch_id,
            row_count,
            stamped,
            inserted,
        };
        last_write = Some(tokio::spawn(write_batch(
            store.clone(),
            config.clone(),
            batch,
            write,
            outcomes.clone(),
            stats.clone(),
        )));
    }
    if let Some(last) = last_write.take() {
        let _ = last.await;
    }
}

/// One batch being written, beside its rows.
struct Write {
    batch_id: u64,
    row_count: usize,
    /// The writer's arrival clock and the batch's stamp, when the writer stamps arrivals.
    stamped: Option<(Arc<ArrivalClock>, u32)>,
    /// Set once the insert has ended (accepted or finally failed).
    inserted: watch::Sender<bool>,
}

/// How long a batch's producers wait, after its insert, for the writer's next publication before
/// they are told to send again.
pub const ANNOUNCE_LIMIT: Duration = Duration::from_secs(30);

/// Inserts a batch, then answers its producers. A writer that stamps arrivals answers only once
/// a publication of its horizon begun after the insert ended has been written: whatever it
/// acknowledged was visible before its latest publication, even when the writer dies right
/// after (docs/data-model.md, "Reading arrivals without an overlap").
async fn write_batch<T: Table>(
    store: Arc<Store>,
    config: Arc<BatchWriterConfig>,
    batch: Vec<Submission<T>>,
    write: Write,
    outcomes: Option<mpsc::UnboundedSender<BatchOutcome>>,
    stats: Arc<WriterStats>,
) {
    let Write {
        batch_id,
        row_count,
        stamped,
        inserted,
    } = write;
    let started = Instant::now();
    let (attempts, mut result) =
        insert_with_retries(&store, &config, &batch, row_count, &stats).await;
    let begun = stamped.as_ref().map(|(clock, _)| {
        let begun = clock.publications_begun();
        clock.batch_done();
        begun
    });
    let _ = inserted.send(true);
    if let (Ok(()), Some((clock, _)), Some(begun)) = (&result, &stamped, begun) {
        if !clock.published_after(begun, ANNOUNCE_LIMIT).await {
            result = Err(format!(
                "inserted, but no arrival horizon could be published after it within {} s; send again",
                ANNOUNCE_LIMIT.as_secs()
            ));
        }
    }
    let accepted = result.is_ok();
    let outcome = BatchOutcome {
        table: T::TABLE,
        batch_id,
        rows: row_count,
        submissions: batch.len(),
        attempts,
        accepted,
        elapsed: started.elapsed(),
    };
    if accepted {
        stats.batches_accepted.fetch_add(1, Ordering::Relaxed);
        stats
            .rows_accepted
            .fetch_add(row_count as u64, Ordering::Relaxed);
        tracing::debug!(
            table = T::TABLE,
            batch_id,
            rows = row_count,
            attempts,
            "batch accepted"
        );
    } else {
        stats.batches_failed.fetch_add(1, Ordering::Relaxed);
        stats
            .rows_failed
            .fetch_add(row_count as u64, Ordering::Relaxed);
    }
    let reply = match result {
        Ok(()) => Ok(Receipt {
            batch_id,
            batch_rows: row_count,
            attempts,
        }),
        Err(error) => {
            tracing::error!(table = T::TABLE, batch_id, rows = row_count, attempts, error = %error, "batch not accepted");
            Err(WriteError::Rejected {
                batch_id,
                table: T::TABLE,
                rows: row_count,
                attempts,
                error,
            })
        }
    };
    for submission in batch {
        let _ = submission.reply.send(reply.clone());
    }
    if let Some(outcomes) = &outcomes {
        let _ = outcomes.send(outcome);
    }
}

async fn insert_with_retries<T: Table>(
    store: &Store,
    config: &BatchWriterConfig,
    batch: &[Submission<T>],
    row_count: usize,
    stats: &WriterStats,
) -> (u32, Result<(), String>) {
    let mut backoff = config.initial_backoff;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match insert_once(store, batch).await {
            Ok(()) => return (attempt, Ok(())),
            Err(err) if attempt >= config.max_attempts.max(1) => {
                return (attempt, Err(err.to_string()))
            }
            Err(err) => {
                stats.retries.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(table = T::TABLE, rows = row_count, attempt, error = %err, retry_in = ?backoff, "insert failed, retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(config.max_backoff);
            }
        }
    }
}

async fn insert_once<T: Table>(
    store: &Store,
    batch: &[Submission<T>],
) -> Result<(), clickhouse::error::Error> {
    let mut insert = store.client().insert::<T>(T::TABLE).await?;
    for submission in batch {
        for row in &submission.rows {
            insert.write(row).await?;
        }
    }
    insert.end().await
}

impl Store {
    /// Inserts `rows` in one statement, without batching or retries (renders, tests, the demo).
    pub async fn insert_rows<T: Table>(&self, rows: &[T]) -> crate::Result<()> {
        use crate::Context;
        let mut insert = self
            .client()
            .insert::<T>(T::TABLE)
            .await
            .context(|| format!("inserting into {}", T::TABLE))?;
        for row in rows {
            insert
                .write(row)
                .await
                .context(|| format!("inserting into {}", T::TABLE))?;
        }
        insert
            .end()
            .await
            .context(|| format!("inserting {} rows into {}", rows.len(), T::TABLE))
    }
}

impl Store {
    /// Physical rows in `T`'s table, duplicates not yet merged away included (benchmarks, tests).
    pub async fn count_rows<T: Table>(&self) -> crate::Result<u64> {
        use crate::Context;
        self.client()
            .query(COUNT_ROWS)
            .bind(clickhouse::sql::Identifier(T::TABLE))
            .fetch_one::<u64>()
            .await
            .context(|| format!("counting rows of {}", T::TABLE))
    }
}

impl Store {
    /// Every physical row of `T`'s table, in storage order (tests and small tables only).
    pub async fn read_table<T>(&self) -> crate::Result<Vec<T>>
    where
        T: Table + clickhouse::RowRead + for<'a> clickhouse::Row<Value<'a> = T>,
    {
        use crate::Context;
        self.client()
            .query(SELECT_WHOLE_TABLE)
            .bind(clickhouse::sql::Identifier(T::TABLE))
            .fetch_all::<T>()
            .await
            .context(|| format!("reading {}", T::TABLE))
    }
}

pub(crate) const SELECT_WHOLE_TABLE: &str = "SELECT ?fields FROM ?";
pub(crate) const COUNT_ROWS: &str = "SELECT count() FROM ?";

/// Arrival stamps and the horizon of one writer. Every stamp and every published horizon comes
/// from `stamp_batch` and `horizon` under one lock, never earlier than any before it, so:
/// rows stamped before a published horizon are in batches that were inserted before it was
/// computed (batches are inserted one at a time, in stamp order), and a row stamped later gets a
/// stamp no earlier than it.
#[derive(Debug)]
struct ArrivalClock {
    state: std::sync::Mutex<ClockState>,
    done: tokio::sync::Notify,
    /// Publications begun so far (each is numbered by this count when it begins).
    begun: AtomicU64,
    /// The greatest number of a publication written.
    published: watch::Sender<u64>,
}

#[derive(Debug)]
struct ClockState {
    /// The latest stamp or horizon given.
    last: u32,
    /// The stamp of the batch being inserted, if one is.
    in_flight: Option<u32>,
}

/// Seconds since the epoch by the system clock.
fn wall_seconds() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
}

/// How often a writer publishes its horizon, moved or not, when no finished batch prompts it
/// sooner.
pub const ARRIVAL_HORIZON_INTERVAL: Duration = Duration::from_secs(1);

/// The least time between two publications of a writer's horizon.
pub const ARRIVAL_HORIZON_SPACING: Duration = Duration::from_millis(10);

impl ArrivalClock {
    /// Publishes the first horizon (retrying until ClickHouse takes it: no row is inserted
    /// before the writer is known), then keeps publishing in the background.
    async fn start(store: Store, writer: String) -> Arc<ArrivalClock> {
        let first = wall_seconds();
        let clock = Arc::new(ArrivalClock {
            state: std::sync::Mutex::new(ClockState {
                last: first,
                in_flight: None,
            }),
            done: tokio::sync::Notify::new(),
            begun: AtomicU64::new(0),
            published: watch::Sender::new(0),
        });
        let name = writer.clone();
        let row = move |visible_before: u32| crate::ArrivalWriterRow {
            writer: name.clone(),
            first_stamp: first,
            visible_before,
        };
        let mut backoff = Duration::from_millis(100);
        loop {
            let number = clock.begin_publication();
            match store.insert_rows(&[row(clock.horizon())]).await {
                Ok(()) => {
                    clock.written(number);
                    break;
                }
                Err(err) => {
                    tracing::warn!(%err, writer, "publishing the first arrival horizon failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
        let publisher = clock.clone();
        tokio::spawn(async move {
            // Every second whether or not the horizon moved: a publication is also the sign
            // that the writer is alive, and the hub stops waiting for a writer that falls
            // silent (docs/data-model.md, "Silence").
            let mut every = tokio::time::interval(ARRIVAL_HORIZON_INTERVAL);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            let mut last = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    _ = publisher.done.notified() => {
                        // Batches can finish many times a second: publish at most every
                        // `ARRIVAL_HORIZON_SPACING` (their producers wait for it).
                        tokio::time::sleep_until(last + ARRIVAL_HORIZON_SPACING).await;
                    }
                }
                last = tokio::time::Instant::now();
                let number = publisher.begin_publication();
                match store.insert_rows(&[row(publisher.horizon())]).await {
                    Ok(()) => publisher.written(number),
                    Err(err) => tracing::warn!(%err, "publishing the arrival horizon failed"),
                }
                every.reset();
                // Stop with the writer: only this task and the worker hold the clock.
                if Arc::strong_count(&publisher) == 1 {
                    break;
                }
            }
        });
        clock
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The stamp of a batch about to be inserted.
    fn stamp_batch(&self) -> u32 {
        let mut state = self.lock();
        let stamp = wall_seconds().max(state.last);
        state.last = stamp;
        state.in_flight = Some(stamp);
        stamp
    }

    /// Numbers a publication about to begin.
    fn begin_publication(&self) -> u64 {
        self.begun.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// How many publications have begun.
    fn publications_begun(&self) -> u64 {
        self.begun.load(Ordering::SeqCst)
    }

    /// Records that publication `number` is written.
    fn written(&self, number: u64) {
        self.published.send_if_modified(|published| {
            let newer = number > *published;
            *published = (*published).max(number);
            newer
        });
    }

    /// Waits until a publication numbered above `begun` (one that began after the count was
    /// read) is written, for at most `limit`; whether one was.
    async fn published_after(&self, begun: u64, limit: Duration) -> bool {
        let mut published = self.published.subscribe();
        tokio::time::timeout(limit, published.wait_for(|number| *number > begun))
            .await
            .is_ok_and(|seen| seen.is_ok())
    }

    fn batch_done(&self) {
        self.lock().in_flight = None;
        self.done.notify_one();
    }

    /// Every row this writer stamped before the returned second is in a batch whose insert
    /// ended: the stamp of the batch being inserted, or, with none, now (a later batch gets no
    /// earlier stamp).
    fn horizon(&self) -> u32 {
        let mut state = self.lock();
        match state.in_flight {
            Some(stamp) => stamp,
            None => {
                let now = wall_seconds().max(state.last);
                state.last = now;
                now
            }
        }
    }
}
