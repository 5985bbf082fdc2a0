"""A stdio pass-through that logs every line the client sends to the server.

Usage: python3 wiretap.py LOG -- COMMAND [ARGS...]
Runs COMMAND with pipes, copies our stdin to its stdin (appending each line,
as sent, to LOG) and its stdout to our stdout. When our stdin ends, COMMAND's
stdin is closed and COMMAND is given a second to exit, then terminated (so
that it never outlives us). Exits with COMMAND's status.
"""
import subprocess
import sys
import threading


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: wiretap.py LOG -- COMMAND [ARGS...]")
    log = open(sys.argv[1], "a", buffering=1)
    child = subprocess.Popen(sys.argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def upstream():
        try:
            for line in sys.stdin.buffer:
                log.write(line.decode("utf-8", "replace"))
                child.stdin.write(line)
                child.stdin.flush()
            child.stdin.close()
        except OSError:
            pass
        try:
            child.wait(timeout=1)
        except subprocess.TimeoutExpired:
            child.terminate()

    threading.Thread(target=upstream, daemon=True).start()
    for line in child.stdout:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
