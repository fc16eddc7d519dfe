"""Runs SQL statements on the current ClickHouse engine (chdb, embedded) for Fleetscope's tests.

Reads {"database": name or null, "config": path or null, "statements": [{"name", "sql", "mode"}]}
as JSON on stdin, where mode is "execute", "fetch" (the result as TabSeparated text, so it can be
compared byte for byte with what a ClickHouse server returns) or "parse" (EXPLAIN AST: the parser
accepts it), and writes {"version", "results": [{"name", "ok", "output", "error"}]} as JSON on
stdout.

With a database, the session creates it and makes it current. With a configuration file
(macros, a cluster, ZooKeeper), replicated and Distributed tables can be created; embedded, those
tables stay read-only and closing the session waits for them, so such a run ends with os._exit
once the answer is written.
"""
import json
import os
import shutil
import sys
import tempfile

os.environ["TZ"] = "UTC"

try:
    from chdb import session as chdb_session
except ImportError:
    sys.stderr.write("chdb is not installed in this Python; run scripts/install-prereqs --tests\n")
    sys.exit(3)


def run_statement(session, statement):
    entry = {"name": statement["name"], "ok": True, "output": "", "error": ""}
    try:
        mode = statement["mode"]
        if mode == "parse":
            session.query("EXPLAIN AST " + statement["sql"], "TabSeparated")
        elif mode == "fetch":
            entry["output"] = str(session.query(statement["sql"], "TabSeparated"))
        else:
            session.query(statement["sql"])
    except Exception as error:  # chdb raises its own error types with ClickHouse's message
        entry["ok"] = False
        entry["error"] = str(error)
    return entry


def main():
    request = json.load(sys.stdin)
    path = tempfile.mkdtemp(prefix="fleetscope-chdb-")
    config = request.get("config")
    session = chdb_session.Session(f"{path}?config-file={config}" if config else path)
    database = request.get("database")
    if database:
        session.query(f"CREATE DATABASE IF NOT EXISTS {database}")
        session.query(f"USE {database}")
    version = str(session.query("SELECT version()", "TabSeparated")).strip()
    results = [run_statement(session, statement) for statement in request["statements"]]
    json.dump({"version": version, "results": results}, sys.stdout)
    sys.stdout.flush()
    if config:
        # Its files go first: the engine's threads may still hold some, and exit ends them.
        shutil.rmtree(path, ignore_errors=True)
        os._exit(0)
    session.close()
    shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
