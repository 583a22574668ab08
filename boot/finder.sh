# replhub finder: runs under `exec /bin/sh -s` on the remote host. It finds
# a Python in one round trip, prints a marker line, and execs that Python on
# the -c stub, which then reads the payload from the same stdin.
# Only the @…@ fields vary; the hub checks each against strict patterns.
#
# It runs no interpreter whose version can be read from where it lives
# (python3.N, a version manager's versions/3.N.x folder, a conda prefix's
# record of its python package, or a symlink to one), and none twice. A
# version manager's shim (pyenv, asdf) is never run: it is resolved by the
# manager's own rules to the interpreter it would exec, and that one is
# considered instead.
T=@TOKEN@
PREFER=@PREFER@
PINNED=@PINNED@
SUDO_MODE=@SUDO@
SUDO_PROMPT=@PROMPT@
found= foundv= first= firstv= tried= seen= later= shimok=
# minor P: sets v to the 3.N that P's name, folders or conda prefix tell,
# after its symlinks; empty when they tell nothing.
minor() {
  m=$1 v= i=0
  while :; do
    case "${m##*/}" in
      python3.[0-9]|python3.[0-9][0-9]) v=${m##*/python}; return ;;
    esac
    case "$m" in
      */versions/3.[0-9].*/bin/*|*/versions/3.[0-9][0-9].*/bin/*|\
      */installs/python/3.[0-9].*/bin/*|*/installs/python/3.[0-9][0-9].*/bin/*)
        v=${m%/bin/*}; v=${v##*/}; v=${v%"${v#3.*.}"}; v=${v%.}; return ;;
      */bin/python|*/bin/python3) conda_minor "${m%/bin/*}" && return ;;
    esac
    [ $i -lt 8 ] && [ -h "$m" ] && command -v readlink >/dev/null 2>&1 || return
    l=$(readlink "$m") || return
    case "$l" in /*) m=$l ;; *) m=${m%/*}/$l ;; esac
    i=$((i+1))
  done
}
# conda_minor PREFIX: sets v to the 3.N of the python package that conda
# recorded in PREFIX as conda-meta/python-3.N.M-BUILD.json.
conda_minor() {
  for f in "$1"/conda-meta/python-3.*-*.json; do
    x=${f##*/python-3.}
    n=${x%%[!0-9]*}
    case "$n" in [0-9]|[0-9][0-9]) ;; *) continue ;; esac
    case "${x#"$n"}" in *-*-*) continue ;; .*-?*.json|-?*.json) ;; *) continue ;; esac
    [ -f "$f" ] && { v=3.$n; return 0; }
  done
  return 1
}
# names_from FILE: the version names in a pyenv version file, as pyenv
# reads it: each line's first word, comments and blank lines skipped.
names_from() {
  [ -f "$1" ] || return 1
  n= c=0
  while { read -r w _ || [ -n "$w" ]; } && [ $c -lt 64 ]; do
    c=$((c+1))
    case "$w" in ''|'#'*) continue ;; esac
    n="$n${n:+:}$w"
  done < "$1"
  [ -n "$n" ]
}
# find_up NAME: the nearest NAME from the current folder upwards.
find_up() {
  d=$PWD
  while :; do
    [ -f "$d/$1" ] && { f="$d/$1"; return 0; }
    [ -z "$d" ] && return 1
    d=${d%/*}
  done
}
# resolve SHIM: sets r to what a pyenv or asdf shim would exec.
resolve() {
  root=${1%/shims/*} prog=${1##*/} r= unknown=
  if [ -d "$root/versions" ]; then
    n=$PYENV_VERSION
    if [ -z "$n" ]; then
      find_up .python-version && names_from "$f" || names_from "$root/version" || n=system
    fi
    # Names are split at colons, never globbed.
    set -f; IFS=:
    for name in $n; do
      unset IFS; set +f
      name=${name#python-}
      case "$name" in system|''|*..*|/*) continue ;; esac
      d="$root/versions/$name"
      if [ ! -d "$d" ]; then
        # a prefix (3.12) is the newest installed 3.12.N
        d= b=-1
        for q in "$root/versions/$name".*; do
          x=${q#"$root/versions/$name".}
          case "$x" in ''|*[!0-9]*) continue ;; esac
          [ "$x" -gt "$b" ] && d=$q b=$x
        done
      fi
      [ -n "$d" ] && [ -x "$d/bin/$prog" ] && { r="$d/bin/$prog"; return 0; }
    done
    unset IFS; set +f
  elif [ -d "$root/installs/python" ]; then
    n=$ASDF_PYTHON_VERSION
    if [ -z "$n" ]; then
      tv=${ASDF_DEFAULT_TOOL_VERSIONS_FILENAME:-.tool-versions}
      find_up "$tv" || f="$HOME/$tv"
      [ -f "$f" ] && while read -r tool rest; do
        [ "$tool" = python ] && { n=$rest; break; }
      done < "$f"
    fi
    set -f
    for name in $n; do
      set +f
      case "$name" in system|*..*|*/*) continue ;; esac
      [ -x "$root/installs/python/$name/bin/$prog" ] && { r="$root/installs/python/$name/bin/$prog"; return 0; }
    done
    set +f
  else
    unknown=1
  fi
  return 1
}
consider() {
  p=$1
  [ -n "$p" ] && [ -f "$p" ] && [ -x "$p" ] || return 1
  case " $seen " in *" $p "*) return 1 ;; esac
  seen="$seen $p"
  case "$p" in
    */shims/*)
      if [ -z "$shimok" ]; then
        tried="$tried $p"
        resolve "$p" && { consider "$r"; return; }
        # A manager this script does not know: its shim is run, but only
        # when nothing else is found.
        [ -n "$unknown" ] && later="$later $p"
        return 1
      fi ;;
  esac
  tried="$tried $p"
  minor "$p"
  if [ -z "$v" ]; then
    v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 1
  fi
  case "$v" in 3.[0-9]|3.[0-9][0-9]) ;; *) return 1 ;; esac
  [ "${v#3.}" -ge 6 ] || return 1
  if [ -z "$first" ]; then first=$p firstv=$v; fi
  if [ "$v" = "$PREFER" ]; then found=$p foundv=$v; return 0; fi
  return 1
}
# conda_pick PREFIX: considers the python of conda prefix PREFIX when its
# name or conda's record tells it is of the preferred minor.
conda_pick() {
  [ -x "$1/bin/python$PREFER" ] && { consider "$1/bin/python$PREFER"; return; }
  for cf in "$1/conda-meta/python-$PREFER".[0-9]*-*.json; do
    [ -f "$cf" ] && { consider "$1/bin/python3"; return; }
  done
  return 1
}
# managed: the interpreters of the preferred minor that version managers
# keep (an activated conda env first, then pyenv, asdf, uv, rye, conda's
# installs and the envs it lists), found by their layout.
managed() {
  [ -n "$PREFER" ] || return 1
  case "$CONDA_PREFIX" in /*) conda_pick "$CONDA_PREFIX" && return 0 ;; esac
  for p in "${PYENV_ROOT:-$HOME/.pyenv}/versions/$PREFER".*/bin/python$PREFER \
      "${ASDF_DATA_DIR:-$HOME/.asdf}/installs/python/$PREFER".*/bin/python$PREFER \
      "${UV_PYTHON_INSTALL_DIR:-$HOME/.local/share/uv/python}/cpython-$PREFER".*/bin/python$PREFER \
      "$HOME/.rye/py/cpython@$PREFER".*/bin/python$PREFER "$HOME/.rye/py/cpython@$PREFER".*/install/bin/python$PREFER; do
    consider "$p" && return 0
  done
  for cr in "$HOME"/miniconda3 "$HOME"/anaconda3 "$HOME"/miniforge3 "$HOME"/mambaforge "$HOME"/micromamba ${MAMBA_ROOT_PREFIX:+"$MAMBA_ROOT_PREFIX"}; do
    [ -d "$cr" ] || continue
    for ce in "$cr" "$cr"/envs/*; do
      conda_pick "$ce" && return 0
    done
  done
  cn=0
  [ -f "$HOME/.conda/environments.txt" ] && while { read -r ce || [ -n "$ce" ]; } && [ $cn -lt 256 ]; do
    cn=$((cn+1))
    case "$ce" in /*) conda_pick "$ce" && return 0 ;; esac
  done < "$HOME/.conda/environments.txt"
  return 1
}
# each ENTRY...: tries entries (names, paths, folders, globs) in order.
each() {
  for e in "$@"; do
    case "$e" in "~/"*) e="$HOME/${e#"~/"}" ;; esac
    case "$e" in
      *[*?[]*)
        for p in $e; do consider "$p" && return 0; done ;;
      */*)
        if [ -d "$e" ]; then
          for p in "$e"/python3* "$e"/bin/python3*; do consider "$p" && return 0; done
        else
          consider "$e" && return 0
        fi ;;
      *)
        # Every match on PATH, not only the first: a broken shim must not
        # hide a working interpreter further on.
        IFS=:
        for d in $PATH; do
          unset IFS
          consider "${d:-.}/$e" && return 0
        done
        unset IFS ;;
    esac
  done
  return 1
}
if [ -n "$PINNED" ]; then
  case "$PINNED" in "~/"*) PINNED="$HOME/${PINNED#"~/"}" ;; esac
  case "$PINNED" in
    */*) p=$PINNED ;;
    *) p=$(command -v "$PINNED" 2>/dev/null) ;;
  esac
  if [ -n "$p" ] && [ -f "$p" ] && [ -x "$p" ]; then
    case "$p" in */shims/*) resolve "$p" && p=$r ;; esac
    found=$p foundv=pinned
  else
    echo "REPLHUB-$T MISSING $PINNED"
    exit 127
  fi
else
  each @CANDIDATES@ || each @PREFERRED@ || managed || each @DEFAULTS@
  if [ -z "$first" ] && [ -n "$later" ]; then
    shimok=1 seen=
    for p in $later; do consider "$p"; [ -n "$first" ] && break; done
  fi
fi
py=${found:-$first}
v=${foundv:-$firstv}
if [ -z "$py" ]; then
  echo "REPLHUB-$T NOPYTHON$tried"
  exit 127
fi
echo "REPLHUB-$T FOUND $v $py"
STUB='@STUB@'
# A root session: sudo -n must not ask; sudo -k -S reads the password
# line that the hub sends right after the marker above.
case "$SUDO_MODE" in
  n) exec "${REPLHUB_SUDO:-sudo}" -n -- "$py" -c "$STUB" ;;
  S) exec "${REPLHUB_SUDO:-sudo}" -k -S -p "$SUDO_PROMPT" -- "$py" -c "$STUB" ;;
esac
exec "$py" -c "$STUB"
