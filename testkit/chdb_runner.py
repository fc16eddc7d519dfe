"""Runs SQL statements on the current ClickHouse engine (chdb, embedded) for Fleetscope's tests.

Reads {"database": name, "statements": [{"name", "sql", "fetch"}]} as JSON on stdin and writes
[{"name", "ok", "output", "error"}] as JSON on stdout. Results are TabSeparated text, so they can
be compared byte for byte with what a ClickHouse server returns.
"""
import json
import os
import sys
import tempfile

os.environ["TZ"] = "UTC"

try:
    from chdb import session as chdb_session
except ImportError:
    sys.stderr.write("chdb is not installed in this Python; run scripts/install-prereqs --tests\n")
    sys.exit(3)


def main():
    request = json.load(sys.stdin)
    results = []
    with tempfile.TemporaryDirectory(prefix="fleetscope-chdb-") as path:
        session = chdb_session.Session(path)
        database = request["database"]
        session.query(f"CREATE DATABASE IF NOT EXISTS {database}")
        session.query(f"USE {database}")
        version = str(session.query("SELECT version()", "TabSeparated")).strip()
        for statement in request["statements"]:
            entry = {"name": statement["name"], "ok": True, "output": "", "error": ""}
            try:
                if statement.get("fetch"):
                    entry["output"] = str(session.query(statement["sql"], "TabSeparated"))
                else:
                    session.query(statement["sql"])
            except Exception as error:  # chdb raises its own error types with ClickHouse's message
                entry["ok"] = False
                entry["error"] = str(error)
            results.append(entry)
        session.close()
    json.dump({"version": version, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
