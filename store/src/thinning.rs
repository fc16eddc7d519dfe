//! Checkpoints thinned by age: every checkpoint for the first hours, then only those on a
//! coarser grid, tier by tier (by default one every 6 hours from 48 hours on and one a day
//! from 7 days on). A moment whose checkpoint was thinned is answered from the kept one before
//! it and the arrivals since, which are kept from the oldest checkpoint on, so every moment
//! from the oldest checkpoint on stays answerable and its answer does not change.
//!
//! A day's checkpoints are thinned together, once the day *ended* a tier's age ago: thinning
//! rewrites the day's partition of `observed_checkpoints` (a mutation), so it happens once per
//! day and tier, not once per checkpoint.

use fleetscope_model::Timestamp;

use crate::clickhouse_cluster::local_table;
use crate::past::Checkpoints;
use crate::{Context, Result, Store};

const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;

/// One tier: checkpoints of days that ended at least `after` seconds ago are kept only when
/// they are a multiple of `every` seconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    pub after: i64,
    pub every: i64,
}

/// The tiers, youngest first; none means every checkpoint is kept until retention drops it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointTiers {
    tiers: Vec<Tier>,
    /// As written (`none` when there are no tiers).
    text: String,
}

/// The collector's default `--checkpoint-thinning`.
pub const DEFAULT_CHECKPOINT_THINNING: &str = "48h=6h,7d=1d";

impl Default for CheckpointTiers {
    fn default() -> Self {
        DEFAULT_CHECKPOINT_THINNING
            .parse()
            .expect("the default tiers are valid")
    }
}

/// Why a `--checkpoint-thinning` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TiersError {
    #[error("{0:?} is not AGE=EVERY (for example 48h=6h): ages and spacings are whole hours (h) or days (d)")]
    Syntax(String),
    #[error("{0:?}: tiers must be listed by age, each older and sparser than the one before, and each spacing a multiple of the one before (so a kept checkpoint stays kept)")]
    Order(String),
}

fn duration(text: &str) -> Option<i64> {
    let (number, unit) = text.split_at(text.len().checked_sub(1)?);
    let number: i64 = number.parse().ok().filter(|n| *n > 0)?;
    match unit {
        "h" => Some(number * HOUR),
        "d" => Some(number * DAY),
        _ => None,
    }
}

impl std::str::FromStr for CheckpointTiers {
    type Err = TiersError;

    /// `AGE=EVERY,…` (`48h=6h,7d=1d`), or `none` to keep every checkpoint.
    fn from_str(text: &str) -> Result<Self, TiersError> {
        let text = text.trim();
        if text == "none" || text.is_empty() {
            return Ok(CheckpointTiers {
                tiers: Vec::new(),
                text: "none".to_owned(),
            });
        }
        let mut tiers = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (after, every) = part
                .split_once('=')
                .and_then(|(a, e)| Some((duration(a.trim())?, duration(e.trim())?)))
                .ok_or_else(|| TiersError::Syntax(part.to_owned()))?;
            let tier = Tier { after, every };
            if let Some(last) = tiers.last().copied() {
                let Tier {
                    after: last_after,
                    every: last_every,
                } = last;
                if after <= last_after || every <= last_every || every % last_every != 0 {
                    return Err(TiersError::Order(text.to_owned()));
                }
            }
            tiers.push(tier);
        }
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        Ok(CheckpointTiers {
            tiers,
            text: parts.join(","),
        })
    }
}

impl std::fmt::Display for CheckpointTiers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl CheckpointTiers {
    pub fn tiers(&self) -> &[Tier] {
        &self.tiers
    }

    /// Whether the checkpoint at `taken` is kept at `now` (the tier is chosen by how long ago
    /// the checkpoint's day ended).
    pub fn keeps(&self, taken: Timestamp, now: Timestamp) -> bool {
        let day_ended = (taken.seconds().div_euclid(DAY) + 1) * DAY;
        let age = now.seconds() - day_ended;
        match self.tiers.iter().rev().find(|tier| age >= tier.after) {
            None => true,
            Some(tier) => taken.seconds().rem_euclid(tier.every) == 0,
        }
    }

    /// The oldest moment from which every checkpoint is kept at `now`: the start of the day
    /// that ended less than the first tier's age ago (`None` without tiers: every checkpoint is
    /// kept).
    pub fn hourly_from(&self, now: Timestamp) -> Option<Timestamp> {
        let first = self.tiers.first()?;
        Some(Timestamp(
            (now.seconds() - first.after).div_euclid(DAY) * DAY,
        ))
    }

    /// How many checkpoints are kept at most over `retention_days`, with one taken every
    /// `every` seconds: what disk planning multiplies a checkpoint's size by.
    pub fn kept_over(&self, every: i64, retention_days: u32) -> u64 {
        let every = every.max(HOUR);
        // The end of a day: the most checkpoints are kept then (retention drops a whole day
        // at midnight).
        let today = 1_000;
        let now = Timestamp((today + 1) * DAY - 1);
        let oldest = (today - i64::from(retention_days.max(1)) + 1) * DAY;
        let mut t = oldest.div_euclid(every) * every;
        if t < oldest {
            t += every;
        }
        let mut kept = 0;
        while t <= now.seconds() {
            if t == oldest || self.keeps(Timestamp(t), now) {
                kept += 1;
            }
            t += every;
        }
        kept
    }
}

impl Checkpoints {
    /// The complete checkpoints that `tiers` drop at `now`. The oldest is never among them:
    /// it is where history begins, and retention alone drops it.
    pub fn thinned(&self, now: Timestamp, tiers: &CheckpointTiers) -> Vec<Timestamp> {
        self.taken
            .iter()
            .skip(1)
            .copied()
            .filter(|taken| !tiers.keeps(*taken, now))
            .collect()
    }
}

/// Marks checkpoints as dropped in the log, so no reader takes them from then on.
pub(crate) const MARK_CHECKPOINTS_DROPPED: &str = "INSERT INTO checkpoint_log \
(taken_at, objects, finished_at, dropped) SELECT toDateTime(arrayJoin(?)) AS taken_at, 0, now() + 1, 1";

/// Deletes the rows of checkpoints (a mutation: the parts that hold them are rewritten).
pub(crate) const DELETE_CHECKPOINTS: &str = "ALTER TABLE ? DELETE WHERE has(?, toUInt32(taken_at))";

/// [`DELETE_CHECKPOINTS`] on every shard of a cluster.
pub(crate) const DELETE_CHECKPOINTS_ON_CLUSTER: &str =
    "ALTER TABLE ?.? ON CLUSTER ? DELETE WHERE has(?, toUInt32(taken_at))";

impl Store {
    /// Drops the checkpoints that `tiers` no longer keep at `now`: first from the log (so no
    /// reader takes one from then on), then their rows. Returns the moments dropped.
    pub async fn thin_checkpoints(
        &self,
        now: Timestamp,
        tiers: &CheckpointTiers,
    ) -> Result<Vec<Timestamp>> {
        let thinned = self.checkpoints().await?.thinned(now, tiers);
        if thinned.is_empty() {
            return Ok(thinned);
        }
        let moments: Vec<u32> = thinned.iter().map(|t| crate::to_datetime(*t)).collect();
        let what = || format!("thinning {} checkpoints", moments.len());
        self.client()
            .query(MARK_CHECKPOINTS_DROPPED)
            .bind(&moments)
            .execute()
            .await
            .context(what)?;
        let physical = local_table("observed_checkpoints", self.cluster());
        let delete = match self.cluster() {
            Some(cluster) => self
                .client()
                .query(DELETE_CHECKPOINTS_ON_CLUSTER)
                .bind(clickhouse::sql::Identifier(self.database()))
                .bind(clickhouse::sql::Identifier(&physical))
                .bind(cluster.name.as_str())
                .with_setting("wait_end_of_query", "1"),
            None => self
                .client()
                .query(DELETE_CHECKPOINTS)
                .bind(clickhouse::sql::Identifier(&physical)),
        };
        delete.bind(&moments).execute().await.context(what)?;
        Ok(thinned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(day: i64, hour: i64) -> Timestamp {
        Timestamp(20_000 * DAY + day * DAY + hour * HOUR)
    }

    #[test]
    fn parses_and_prints_tiers() {
        let tiers: CheckpointTiers = "48h=6h,7d=1d".parse().unwrap();
        assert_eq!(
            tiers.tiers(),
            &[
                Tier {
                    after: 48 * HOUR,
                    every: 6 * HOUR
                },
                Tier {
                    after: 7 * DAY,
                    every: DAY
                }
            ]
        );
        assert_eq!(tiers.to_string(), "48h=6h,7d=1d");
        assert_eq!(CheckpointTiers::default(), tiers);
        assert_eq!(
            "none".parse::<CheckpointTiers>().unwrap().to_string(),
            "none"
        );
        for bad in [
            "48h",
            "48x=6h",
            "0h=6h",
            "48h=6h,24h=1d",
            "48h=6h,7d=4h",
            "48h=6h,7d=8h",
        ] {
            assert!(bad.parse::<CheckpointTiers>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_day_is_thinned_once_it_ended_a_tier_ago() {
        let tiers = CheckpointTiers::default();
        let now = at(10, 0);
        // Day 7 ended 48 h before `now`: every 6 h; day 8 ended 24 h ago: every hour.
        assert!(tiers.keeps(at(8, 5), now));
        assert!(!tiers.keeps(at(7, 5), now));
        assert!(tiers.keeps(at(7, 6), now));
        // Day 2 ended 7 days before `now`: one a day.
        assert!(tiers.keeps(at(3, 6), now));
        assert!(!tiers.keeps(at(2, 6), now));
        assert!(tiers.keeps(at(2, 0), now));
        let none: CheckpointTiers = "none".parse().unwrap();
        assert!(none.keeps(at(0, 5), now));
    }

    #[test]
    fn every_checkpoint_from_the_hourly_start_on_is_kept() {
        let tiers = CheckpointTiers::default();
        for now in [at(10, 0), at(10, 1), at(10, 23), at(11, 0).plus_seconds(-1)] {
            let from = tiers.hourly_from(now).unwrap();
            assert!((0..24).all(|h| tiers.keeps(from.plus_seconds(h * HOUR), now)));
            assert!(!tiers.keeps(from.plus_seconds(-HOUR), now), "{now:?}");
            assert!(now.seconds() - from.seconds() >= 48 * HOUR);
            assert!(now.seconds() - from.seconds() < 72 * HOUR);
        }
        assert_eq!(tiers.hourly_from(at(10, 5)), Some(at(8, 0)));
        let none: CheckpointTiers = "none".parse().unwrap();
        assert_eq!(none.hourly_from(at(10, 5)), None);
    }

    #[test]
    fn the_oldest_checkpoint_is_never_thinned() {
        let checkpoints = Checkpoints {
            taken: vec![at(0, 13), at(0, 14), at(1, 0), at(1, 1), at(9, 23)],
        };
        let thinned = checkpoints.thinned(at(10, 0), &CheckpointTiers::default());
        assert_eq!(thinned, vec![at(0, 14), at(1, 1)]);
    }

    #[test]
    fn kept_over_a_retention() {
        let tiers = CheckpointTiers::default();
        // 30 days at the end of a day: 72 hourly (the last three days), 5 days of 4, 22 of 1.
        assert_eq!(tiers.kept_over(HOUR, 30), 72 + 20 + 22);
        assert_eq!(tiers.kept_over(HOUR, 90), 72 + 20 + 82);
        let none: CheckpointTiers = "none".parse().unwrap();
        assert_eq!(none.kept_over(HOUR, 30), 30 * 24);
    }
}
