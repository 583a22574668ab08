#!/bin/sh
# A fake askpass: prints the first line of $FAKE_ASKPASS_FILE and records
# each call (its prompt) in $FAKE_ASKPASS_CALLS.
[ -n "$FAKE_ASKPASS_CALLS" ] && printf '%s\n' "$1" >> "$FAKE_ASKPASS_CALLS"
head -n 1 "$FAKE_ASKPASS_FILE"
