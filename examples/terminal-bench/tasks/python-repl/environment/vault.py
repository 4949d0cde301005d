"""A lock that opens only for a person at an interactive interpreter."""
import hashlib
import os
import sys

_STATE = "/app/.challenge"


def challenge():
    """A fresh number; unlock() wants its square."""
    if not hasattr(sys, "ps1"):
        raise RuntimeError("vault works only at the interactive prompt (run python3, then import vault)")
    number = int.from_bytes(os.urandom(3), "big") + 1000
    with open(_STATE, "w") as state:
        state.write(str(number))
    return number


def unlock(answer):
    with open(_STATE) as state:
        number = int(state.read())
    if answer != number * number:
        print("wrong answer")
        return False
    digest = hashlib.sha256(f"{number}:interactive".encode()).hexdigest()
    with open("/app/unlocked.txt", "w") as out:
        out.write(f"{number} {digest}\n")
    print("unlocked")
    return True
