"""A fake sudo for tests: it checks the password relay without a prompt.

Environment: FAKE_SUDO_MODE is nopasswd (run the command), password (want
the bytes in FAKE_SUDO_EXPECT_FILE on the first stdin line when -S, refuse
-n), or silent
(never answer). Every line read as a password is appended, byte-exact, to
FAKE_SUDO_LOG.
"""
import os
import sys
import time

args = sys.argv[1:]
opts = {"-n": False, "-k": False, "-S": False}
prompt = "Password: "
while args and args[0].startswith("-"):
    a = args.pop(0)
    if a == "--":
        break
    if a == "-p":
        prompt = args.pop(0)
    else:
        opts[a] = True
mode = os.environ.get("FAKE_SUDO_MODE", "password")
log = os.environ.get("FAKE_SUDO_LOG")
if mode == "silent":
    time.sleep(3600)
if mode == "password":
    if opts["-n"]:
        sys.stderr.write("sudo: a password is required\n")
        sys.exit(1)
    with open(os.environ["FAKE_SUDO_EXPECT_FILE"], "rb") as f:
        expect = f.read().rstrip(b"\n")
    for attempt in range(3):
        os.write(2, prompt.encode())
        line = b""
        while not line.endswith(b"\n"):
            c = os.read(0, 1)
            if not c:
                sys.exit(1)
            line += c
        if log:
            with open(log, "ab") as f:
                f.write(line)
        if line[:-1] == expect:
            break
        os.write(2, b"Sorry, try again.\n")
    else:
        sys.stderr.write("sudo: 3 incorrect password attempts\n")
        sys.exit(1)
os.execvp(args[0], args)
