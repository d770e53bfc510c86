# Helpers sourced by the dev/data/*.sh scripts (not run on its own).
# Every script: runs from the repository root, stops at the first error with one line naming what
# failed and what was expected, and skips work whose output is already there.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

SCRIPT_NAME=$(basename "$0" .sh)

die() { # MESSAGE...: one line on stderr, exit 1
  echo "$SCRIPT_NAME: $*" >&2
  exit 1
}

info() { echo "$SCRIPT_NAME: $*"; }

source dev/data/apt.sh  # apt_get

# installs Debian packages that are missing (apt-get update once first); needs root. Waits for
# another apt or dpkg, shows apt's output if it fails (apt_get, dev/data/apt.sh)
APT_UPDATED=0
apt_ensure() { # PACKAGE...
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null 2>&1 || die "needs the Debian packages ${missing[*]}, and apt-get is not available (HINT: install them by hand)"
  [ "$(id -u)" = 0 ] || die "needs the Debian packages ${missing[*]} (HINT: run as root, or sudo apt-get install ${missing[*]})"
  info "installing ${missing[*]} with apt-get"
  if [ "$APT_UPDATED" = 0 ]; then
    apt_get "$SCRIPT_NAME" update || exit 1
    APT_UPDATED=1
  fi
  apt_get "$SCRIPT_NAME" install "${missing[@]}" || exit 1
}

# builds the shard writer
build_encode_text() {
  make -s dev/data/encode_text >/dev/null || die "could not build dev/data/encode_text (HINT: make dev/data/encode_text)"
}

# the token count of one shard's header (int32 [2] of its 1024 bytes)
shard_tokens() { # FILE
  od -A n -t d4 -j 8 -N 4 "$1" | tr -d ' '
}

# tokens in shards matching a glob (reads the 1024-byte headers)
count_tokens() { # GLOB
  local total=0 f n
  for f in $1; do
    [ -f "$f" ] || continue
    n=$(shard_tokens "$f")
    total=$((total + n))
  done
  echo "$total"
}

# writes the six Austen novels, one text file per novel (publication order), into DIR
export_austen() { # DIR
  local dir=$1
  apt_ensure r-cran-janeaustenr
  command -v Rscript >/dev/null 2>&1 || apt_ensure r-base-core
  mkdir -p "$dir"
  Rscript --vanilla -e '
    args <- commandArgs(trailingOnly = TRUE)
    books <- c("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")
    for (i in seq_along(books)) {
      e <- new.env()
      data(list = books[i], package = "janeaustenr", envir = e)
      out <- file.path(args[1], sprintf("%d_%s.txt", i, books[i]))
      writeLines(enc2utf8(get(books[i], envir = e)), paste0(out, ".tmp"), useBytes = TRUE)
      # file.rename returns FALSE on failure rather than stopping: a novel left as .tmp would be
      # missing from the *.txt glob of the encoding, silently
      if (!file.rename(paste0(out, ".tmp"), out)) stop("cannot rename ", out, ".tmp to ", out)
    }' "$dir" >/dev/null || die "Rscript could not export the novels of janeaustenr into $dir"
}

# one line for a failed curl download, then exit 1
download_failed() { # CURL_EXIT_CODE URL WHAT
  case "$1" in
    5|6|7|28|35|56)
      die "cannot download $2: the network is unreachable from this machine (HINT: $3 needs the internet; offline corpora: bash dev/data/prepare_austen.sh, bash dev/data/prepare_mix.sh)" ;;
    22)
      die "cannot download $2: the server answered with an HTTP error (expected the file there; HINT: is the URL still valid?)" ;;
    *)
      die "cannot download $2: curl failed with exit code $1" ;;
  esac
}
