#!/usr/bin/env bash
# Mutation testing of the modules whose whole point is what they do when
# things go wrong: the JSONL crash repair, the archive import, and the
# journal readers. Slow (tens of minutes on two cores), so not part of CI.
#
#   scripts/mutation.sh [MODULE...]        default: the four modules below
#   scripts/mutation.sh sessionstore/backends/sql/group.py sessionstore/backends/sql/database.py
#                                          the SQL store's group commit and transactions
#
# Runs mutmut (pip install mutmut) on a copy of the work tree, so nothing
# in it changes; the copy stays in $MUTATION_WORK (default: a new temporary
# directory, printed) for `mutmut show <name>` and `mutmut browse`. Prints
# each module's killed / total (a mutant that makes the tests time out counts
# as killed), the survivors by name, and the score with the survivors judged
# equivalent (listed in scripts/mutation.md, each with its reason) set
# aside. Needs no PostgreSQL: those tests skip.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python}
work=${MUTATION_WORK:-$(mktemp -d /tmp/sessionstore-mutation.XXXXXX)}
children=${MUTATION_CHILDREN:-2}
modules=("$@")
if [ ${#modules[@]} -eq 0 ]; then
    modules=(
        sessionstore/backends/jsonl/file.py
        sessionstore/archive/importing.py
        sessionstore/journal.py
        sessionstore/backends/jsonl/journal.py
    )
fi

# The tests of the modules chosen; the slowest (memory over 200,000
# entries, kills of whole processes) add nothing a faster one does not check.
if [[ "${modules[0]}" == sessionstore/backends/sql/* ]]; then
    selection=(tests/backends/sql/test_writer_lock.py tests/backends/sql/test_sqlite.py
        tests/backends/sql/test_tamper.py tests/backends/sql/test_workers.py
        tests/backends/sql/test_contexts.py tests/backends/sql/test_database.py
        tests/backends/sql/test_group.py
        tests/test_migrations.py tests/test_open_store.py tests/test_adversarial_findings.py
        tests/contract/test_stores.py)
    filter="not memory and not jsonl and not postgresql and not installed_wheel and not alembic and not populated"
else
    selection=(tests/backends/jsonl/test_store.py tests/backends/jsonl/test_repair.py
        tests/backends/jsonl/test_hostile.py tests/backends/jsonl/test_context.py
        tests/archive/test_export_import.py tests/archive/test_hostile.py
        tests/test_journal_parse.py tests/test_journal_stream.py tests/test_journal_model.py
        tests/backends/jsonl/test_file_journal.py tests/backends/jsonl/test_file_journal_hostile.py
        tests/contract/test_journals.py)
    filter="not memory_stays_flat and not kill_during and not sigkill and not two_processes"
fi

echo "mutation work tree: $work"
mkdir -p "$work"
# The tracked and new files of the work tree, as they stand.
(cd "$repo" && git ls-files -co --exclude-standard -z | grep -zv '^sessionstore/migrations' |
    tar --null -T - -cf -) | tar -C "$work" -xf -
# An installed checkout finds the migrations at sessionstore.migrations.
rm -rf "$work/sessionstore/migrations"
cp -r "$work/migrations" "$work/sessionstore/migrations"

{
    echo "[mutmut]"
    echo "source_paths = sessionstore"
    echo "only_mutate ="
    for module in "${modules[@]}"; do echo "    $module"; done
    # The tests of these modules; the slowest (memory over 200,000 entries,
    # kills of whole processes) add nothing a faster one does not check.
    echo "pytest_add_cli_args_test_selection ="
    for tests in "${selection[@]}"; do echo "    $tests"; done
    echo "pytest_add_cli_args ="
    echo "    -p"
    echo "    no:cacheprovider"
    echo "    -n"
    echo "    0"
    echo "    -k"
    echo "    $filter"
} >"$work/setup.cfg"

cd "$work"
unset CI SESSIONSTORE_PG_URL
nice -n 15 "$python" -m mutmut run --max-children "$children" >"$work/run.log" 2>&1 || {
    tail -40 "$work/run.log"
    exit 1
}
"$python" -m mutmut results --all true >"$work/results.txt" 2>&1 || true
"$python" - "$work/results.txt" "$repo/scripts/mutation.md" "${modules[@]}" <<'EOF'
"""Score each module: killed / all, and with the equivalent mutants set aside."""
import re
import sys
from collections import Counter
from pathlib import Path

results, notes, modules = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
equivalent = set(re.findall(r"^\| `([^`]+)` \|", notes.read_text(), re.M)) if notes.exists() else set()
status: dict[str, str] = {}
for line in results.read_text().splitlines():
    name, _, verdict = line.strip().rpartition(": ")
    if name:
        status[name] = verdict
for module in modules:
    prefix = module.removesuffix(".py").replace("/", ".") + "."
    mine = {n: s for n, s in status.items() if n.startswith(prefix)}
    counts = Counter(mine.values())
    total, killed = len(mine), counts["killed"] + counts["timeout"]
    survivors = sorted(n for n, s in mine.items() if s not in ("killed", "timeout"))
    judged = [n for n in survivors if n in equivalent]
    left = [n for n in survivors if n not in equivalent]
    score = 100 * killed / max(1, total - len(judged))
    print(f"{module}: {killed}/{total} killed ({100 * killed / max(1, total):.0f}%), "
          f"{len(judged)} equivalent set aside: {score:.0f}%  {dict(counts)}")
    for name in left:
        print(f"    survived: {name} ({mine[name]})")
EOF
