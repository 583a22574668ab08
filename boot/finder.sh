# replhub finder: runs under `exec /bin/sh -s` on the remote host. It finds
# a Python in one round trip, prints a marker line, and execs that Python on
# the -c stub, which then reads the payload from the same stdin.
# Only the @…@ fields vary; the hub checks each against strict patterns.
T=@TOKEN@
PREFER=@PREFER@
PINNED=@PINNED@
SUDO_MODE=@SUDO@
SUDO_PROMPT=@PROMPT@
found= foundv= first= firstv= tried=
consider() {
  p=$1
  [ -n "$p" ] && [ -f "$p" ] && [ -x "$p" ] || return 1
  tried="$tried $p"
  # A python3.N is taken at its name, but for version-manager shims, which
  # may fail for a version that is installed but not selected.
  case "$p" in
    */shims/*) v= ;;
    *) case "${p##*/}" in python3.[0-9]|python3.[0-9][0-9]) v=${p##*/python} ;; *) v= ;; esac ;;
  esac
  if [ -z "$v" ]; then
    v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 1
  fi
  case "$v" in 3.[0-9]|3.[0-9][0-9]) ;; *) return 1 ;; esac
  [ "${v#3.}" -ge 6 ] || return 1
  if [ -z "$first" ]; then first=$p firstv=$v; fi
  if [ "$v" = "$PREFER" ]; then found=$p foundv=$v; return 0; fi
  return 1
}
if [ -n "$PINNED" ]; then
  case "$PINNED" in "~/"*) PINNED="$HOME/${PINNED#"~/"}" ;; esac
  case "$PINNED" in
    */*) p=$PINNED ;;
    *) p=$(command -v "$PINNED" 2>/dev/null) ;;
  esac
  if [ -n "$p" ] && [ -f "$p" ] && [ -x "$p" ]; then
    found=$p foundv=pinned
  else
    echo "REPLHUB-$T MISSING $PINNED"
    exit 127
  fi
else
  for e in @CANDIDATES@; do
    case "$e" in "~/"*) e="$HOME/${e#"~/"}" ;; esac
    case "$e" in
      *[*?[]*)
        for p in $e; do consider "$p" && break 2; done ;;
      */*)
        if [ -d "$e" ]; then
          for p in "$e"/python3* "$e"/bin/python3*; do consider "$p" && break 2; done
        else
          consider "$e" && break
        fi ;;
      *)
        # Every match on PATH, not only the first: a broken shim must not
        # hide a working interpreter further on.
        IFS=:
        for d in $PATH; do
          unset IFS
          consider "${d:-.}/$e" && break 2
        done
        unset IFS ;;
    esac
  done
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
