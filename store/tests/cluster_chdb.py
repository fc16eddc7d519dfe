"""Runs cluster mode's statements on the current ClickHouse engine (chdb, embedded) for the
store's cluster conformance test.

Reads {"config": path, "statements": [{"name", "sql", "mode"}]} as JSON on stdin, where mode is
"parse" (EXPLAIN AST: the parser accepts it), "execute" or "fetch" (TabSeparated result), and
writes {"version", "results": [{"name", "ok", "output", "error"}]} as JSON on stdout.

The session gets the configuration file (macros, a cluster, ZooKeeper), so replicated and
Distributed tables can be created. Embedded, replicated tables stay read-only and closing the
session waits for them, so the process ends with os._exit once the answer is written.
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
    path = tempfile.mkdtemp(prefix="fleetscope-chdb-cluster-")
    session = chdb_session.Session(f"{path}?config-file={request['config']}")
    version = str(session.query("SELECT version()", "TabSeparated")).strip()
    for statement in request["statements"]:
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
        results.append(entry)
    json.dump({"version": version, "results": results}, sys.stdout)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
