"""Validates dashboards against Grafana's dashboard JSON Schema with the jsonschema package.

Reads {"schema": path, "documents": [{"name", "document"}]} as JSON on stdin and writes
{"validator": name, "results": [{"name", "errors": [text]}]} as JSON on stdout.
Exit status 3: jsonschema is missing; 4: the schema file cannot be read.
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    sys.stderr.write("jsonschema is not installed in this Python\n")
    sys.exit(3)


def main():
    request = json.load(sys.stdin)
    try:
        with open(request["schema"], encoding="utf-8") as handle:
            schema = json.load(handle)
    except (OSError, ValueError) as error:
        sys.stderr.write(f"cannot read {request['schema']}: {error}\n")
        sys.exit(4)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    results = []
    for entry in request["documents"]:
        errors = []
        for error in sorted(validator.iter_errors(entry["document"]), key=lambda e: list(e.absolute_path)):
            path = "/".join(str(part) for part in error.absolute_path)
            errors.append(f"/{path}: {error.message}")
            # anyOf failures say little on their own; name what each branch refused.
            for cause in error.context or []:
                inner = "/".join(str(part) for part in cause.absolute_path)
                errors.append(f"    /{inner}: {cause.message}")
        results.append({"name": entry["name"], "errors": errors})
    json.dump({"validator": validator_class.__name__, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
