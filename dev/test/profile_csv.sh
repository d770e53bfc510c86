# Sourced by the suites that check a trainer's --profile (dev/test/test_cpu.sh, test_cudacpu.sh):
# what its CSV (--profile_csv, dev/trainer/profile.h) says against what the suite expects.
#
#   source dev/test/profile_csv.sh
#   profile_csv_check CSV STEP_MS "row row ..."   # the rows expected, in order; STEP_MS: the
#                                                   # trainer's own summary ms/step of the same steps
#
# Sets got (the CSV's rows but total), untimed (rows with no time), rows_ms (their sum) and apart (%
# from STEP_MS); returns 0 when the rows are exactly the expected ones, each timed, within 5%.
profile_csv_check() {
  local csv=$1 step_ms=$2 want=$3
  got=$(awk -F, 'NR > 1 && $1 != "total" { printf "%s%s", (n++ ? " " : ""), $1 }' "$csv" 2>/dev/null)
  untimed=$(awk -F, 'NR > 1 && $1 != "total" && $2 <= 0 { printf "%s ", $1 }' "$csv" 2>/dev/null)
  rows_ms=$(awk -F, 'NR > 1 && $1 != "total" { t += $2 } END { printf "%.3f", t }' "$csv" 2>/dev/null)
  apart=$(awk -v a="$rows_ms" -v b="$step_ms" 'BEGIN { if (b <= 0) { print 100; exit } d = a - b; if (d < 0) d = -d; printf "%.2f", 100 * d / b }')
  [ "$got" = "$want" ] && [ -z "$untimed" ] && awk -v p="$apart" 'BEGIN { exit !(p <= 5) }'
}
