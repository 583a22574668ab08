"""Tests of replhub_toolkit.swap's look at what would keep a session from
being swapped, with real child processes. Every child a test starts is
killed and reaped before it returns."""

import subprocess
import time
import unittest

from replhub_toolkit import swap


class ChildrenTest(unittest.TestCase):
    def test_a_child_just_started_is_named_by_its_command(self):
        # Read straight after Popen, a child's command line is often still
        # empty (the exec has closed its descriptors, so Popen returned,
        # but the kernel has not yet set it): 20 times in a row makes that
        # window all but certain to be met on the Pythons that spawn so.
        for i in range(20):
            child = subprocess.Popen(["sleep", "30"])
            try:
                self.assertEqual(swap.children(), ["pid %d: sleep 30" % child.pid], "try %d" % i)
            finally:
                child.kill()
                child.wait()

    def test_a_command_line_that_stays_empty_gives_the_name(self):
        # A zombie keeps its name and has no command line: what a child
        # caught mid-exec shows, for as long as a test needs.
        child = subprocess.Popen(["true"])
        try:
            deadline = time.monotonic() + 5
            while state(child.pid) != "Z" and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(state(child.pid), "Z")
            self.assertEqual(swap._command(child.pid), "[true]")
            self.assertEqual(swap.children(), [], "a zombie is no job")
        finally:
            child.wait()

    def test_none_when_no_child_runs(self):
        self.assertEqual(swap.children(), [])


def state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


if __name__ == "__main__":
    unittest.main()
