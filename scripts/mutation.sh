#!/usr/bin/env bash
# Mutation testing of one module with mutmut (PyPI; pip install mutmut): every mutant of MODULE is run against
# the tests that guard it; a mutant the tests do not fail on ("survived") is either a missing test or an
# equivalent change — docs/testing.md lists the kill rate per module and the survivors with reasons.
#
# Usage: scripts/mutation.sh MODULE [TEST_PATH ...]
#   MODULE      a file under orchestrator/, e.g. orchestrator/analysis/compare.py
#   TEST_PATH   the tests to run (default: the ones named for MODULE below)
# Env: MUTATION_JOBS (parallel mutants, default: the number of cores), MUTATION_KEEP=1 keeps the scratch copy,
#   MUTATION_FUNCS: mutate only these functions of MODULE (space-separated; `Class.method` or a module-level
#     `function`; a trailing `*` is a glob), e.g. MUTATION_FUNCS="Store.ingest_many Store._apply _result_row" —
#     for a large module whose other functions have other guards (store/repo.py's write path),
#   MUTATION_DB=sqlite: deselect the PostgreSQL half of the store tests (`-m "not postgres"`): each mutant's
#     test process would start its own PostgreSQL server otherwise.
#
# Works on a copy of the working tree (tracked and new files) in a temporary directory, so the checkout is never
# touched; prints mutmut's per-mutant results and a "killed K of N (P%)" line; exit 0 whatever survived.
# Not part of scripts/test.sh (minutes per module).
set -euo pipefail
# The body is one function, read whole before it runs: editing this file during a run (minutes to hours) cannot
# change what the run executes next.
main() {
cd "$(dirname "$0")/.."
root=$PWD
mod=${1:?usage: scripts/mutation.sh MODULE [TEST_PATH ...], e.g. orchestrator/analysis/compare.py}
shift
[ -f "$mod" ] || { echo "mutation: no file $mod (give a path under orchestrator/)" >&2; exit 2; }
case "$mod" in orchestrator/*.py) ;; *) echo "mutation: $mod is not a module under orchestrator/" >&2; exit 2;; esac
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  case "$mod" in
    orchestrator/analysis/compare.py) tests=(tests/unit/test_compare.py tests/unit/test_compare_edges.py) ;;
    orchestrator/analysis/plateau.py) tests=(tests/unit/test_plateau.py) ;;
    orchestrator/analysis/roofline.py) tests=(tests/unit/test_roofline.py tests/unit/test_roofline_edges.py) ;;
    orchestrator/analysis/stats.py) tests=(tests/unit/test_stats.py tests/unit/test_stats_mutants.py) ;;
    orchestrator/analysis/projection.py) tests=(tests/unit/test_projection.py) ;;
    orchestrator/analysis/changes.py) tests=(tests/unit/test_changes.py) ;;
    orchestrator/analysis/gpus.py) tests=(tests/unit/test_gpus.py) ;;
    orchestrator/analysis/telemetry.py) tests=(tests/unit/test_telemetry.py) ;;
    orchestrator/analysis/views.py) tests=(tests/unit/test_views.py tests/unit/test_views_mutants.py) ;;
    orchestrator/analysis/roof.py) tests=(tests/unit/test_roof.py) ;;
    orchestrator/analysis/casestats.py) tests=(tests/unit/test_casestats.py) ;;
    orchestrator/analysis/enrich.py) tests=(tests/unit/test_enrich.py tests/unit/test_roofline.py tests/unit/test_decode_bench.py tests/unit/test_agent_multigpu.py) ;;
    orchestrator/protocol.py) tests=(tests/unit/test_protocol_schema.py) ;;
    orchestrator/hostkeys.py) tests=(tests/unit/test_hostkeys.py tests/unit/test_hostkeys_edges.py tests/unit/test_hostkeys_mutants.py) ;;
    orchestrator/ingest.py) tests=(tests/unit/test_ingest_lines.py tests/unit/test_ingest_verdicts.py tests/unit/test_line_checks.py tests/unit/test_ingest_mutants.py) ;;
    orchestrator/transport/lines.py) tests=(tests/unit/test_ingest_lines.py tests/unit/test_line_splitter_edges.py) ;;
    orchestrator/trust.py) tests=(tests/unit/test_trust_record.py tests/integration/test_trust_offer.py) ;;
    orchestrator/parsers/nccl_tests.py) tests=(tests/unit/test_nccl_tests_parser.py tests/unit/test_nccl_tests_suite.py tests/unit/test_nccl_tests_edges.py tests/unit/test_parser_numbers.py tests/unit/test_nccl_tests_mutants.py) ;;
    orchestrator/parsers/base.py) tests=(tests/unit/test_parsers.py tests/unit/test_failed_requests.py tests/unit/test_parsers_base.py tests/unit/test_parsers_base_mutants.py) ;;
    orchestrator/parsers/*) tests=(tests/unit/test_parsers.py tests/unit/test_failed_requests.py tests/unit/test_parsers_base.py tests/unit/test_parsers_formats.py tests/unit/test_parser_numbers.py) ;;
    orchestrator/store/compute.py) tests=(tests/unit/test_store_compute.py) ;;
    orchestrator/store/storable.py) tests=(tests/unit/test_storable.py tests/unit/test_protocol_schema.py) ;;
    orchestrator/linecheck.py) tests=(tests/unit/test_line_checks.py tests/unit/test_line_checks_fields.py) ;;
    orchestrator/store_writer.py) tests=(tests/unit/test_store_writer.py tests/unit/test_store_writer_edges.py tests/unit/test_store_writer_stop.py tests/integration/test_store_writer.py) ;;
    orchestrator/store/repo.py)  # the write path (with MUTATION_FUNCS; MUTATION_DB=sqlite for minutes, not hours)
      t=tests/integration/test_store.py
      tests=(tests/integration/test_store_ingest_many.py tests/integration/test_store_storable.py
             tests/integration/test_store_write_path.py tests/integration/test_store_write_path_pg.py
             "$t::test_ingest_idempotent_and_resumable" "$t::test_ingest_stores_statistics_and_samples_apart"
             "$t::test_ingest_duplicates_within_batch_and_unique_backstop" "$t::test_errors_logs_and_unknown_events"
             "$t::test_sqlite_ingest_stores_the_rows_sqlalchemys_own_insert_would"
             "$t::test_reingest_skips_what_is_stored_log_error_text_and_counts_included") ;;
    orchestrator/resume.py) tests=(tests/unit/test_resume.py) ;;
    *) echo "mutation: name the tests for $mod: scripts/mutation.sh $mod tests/..." >&2; exit 2 ;;
  esac
fi
if ! command -v "$root/.venv/bin/mutmut" >/dev/null; then  # a fresh clone: scripts/setup.sh does not install it
  echo "mutation: installing mutmut into .venv (pip install 'mutmut>=3.3,<4')..." >&2
  "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check 'mutmut>=3.3,<4' \
    || { echo "mutation: could not install mutmut into $root/.venv" >&2; exit 2; }
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/orch-mutation.XXXXXX")
[ "${MUTATION_KEEP:-}" = 1 ] || trap 'rm -rf "$work"' EXIT
git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' \
  | tar --null -T - -cf - | tar -xf - -C "$work"
{
  echo "[mutmut]"
  echo "source_paths ="
  echo "    orchestrator"
  echo "only_mutate ="
  echo "    $mod"
  echo "also_copy ="
  for extra in agents migrations alembic.ini; do [ -e "$extra" ] && echo "    $extra"; done
  echo "pytest_add_cli_args_test_selection ="
  for t in "${tests[@]}"; do echo "    $t"; done
  echo "pytest_add_cli_args ="
  echo "    -p"
  echo "    no:cacheprovider"
  if [ "${MUTATION_DB:-all}" = sqlite ]; then echo "    -m"; echo "    not postgres"; fi
} > "$work/setup.cfg"
cd "$work"
# MUTATION_FUNCS -> mutmut's mutant-name globs: orchestrator.store.repo.xǁStoreǁingest__mutmut_* for a method,
# orchestrator.store.repo.x__result_row__mutmut_* for a module-level function
dotted=${mod%.py}
dotted=${dotted//\//.}
globs=()
set -f  # a `*` in MUTATION_FUNCS is mutmut's glob, not the shell's
for f in ${MUTATION_FUNCS:-}; do
  case "$f" in
    *.*) globs+=("$dotted.xǁ${f%%.*}ǁ${f#*.}__mutmut_*") ;;
    *) globs+=("$dotted.x_${f}__mutmut_*") ;;
  esac
done
set +f
echo "== mutmut on $mod${MUTATION_FUNCS:+ (functions: $MUTATION_FUNCS)} against ${tests[*]} (in $work)"
# The mutated copy (mutants/) must be what the tests import, not the editable install of the shared venv.
env -u PYTHONPATH "$root/.venv/bin/mutmut" run --max-children "${MUTATION_JOBS:-$(nproc)}" "${globs[@]}" \
  >mutmut.log 2>&1 || { tail -40 mutmut.log >&2; exit 1; }
"$root/.venv/bin/mutmut" results --all true > results.txt 2>&1 || true
"$root/.venv/bin/python" - "$mod" "${globs[@]}" <<'PY'
import fnmatch, sys
mod, globs = sys.argv[1], sys.argv[2:]
rows = [l.strip() for l in open("results.txt") if ":" in l]
status = {}
for l in rows:
    name, _, st = l.rpartition(":")
    if not globs or any(fnmatch.fnmatchcase(name.strip(), g) for g in globs):
        status[name.strip()] = st.strip()
n = len(status)
killed = sum(1 for s in status.values() if s == "killed")
for name, st in sorted(status.items()):
    if st != "killed":
        print(f"{st:12} {name}")
print(f"{mod}: killed {killed} of {n} mutants ({100.0 * killed / n if n else 0:.1f}%)")
PY
echo "(see one: cd $work && $root/.venv/bin/mutmut show NAME — set MUTATION_KEEP=1 to keep $work)"
}
main "$@"
