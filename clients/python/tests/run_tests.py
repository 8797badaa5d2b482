"""Run the client's unittest suite and print one line per test for the
integration area (tests/integration/t_python_client.sh):

    PASS <test>            FAIL <test>: <reason>            SKIP <test>: <reason>

followed, for a failure, by its traceback indented with "     | ".  Exit
status 0 when nothing failed.  Usage: python3 tests/run_tests.py [PATTERN]
(the environment of support.py names the daemons).
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class LineResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.failed = 0

    @staticmethod
    def _name(test):
        return "%s.%s" % (type(test).__name__, getattr(test, "_testMethodName", str(test)))

    def _print(self, line):
        print(line, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._print("PASS %s" % self._name(test))

    def _failed(self, test, err):
        self.failed += 1
        text = self._exc_info_to_string(err, test).rstrip().splitlines()
        # The exception's own line follows the last indented line of the stack.
        stack = [i for i, line in enumerate(text) if line.startswith("  ")]
        at = stack[-1] + 1 if stack and stack[-1] + 1 < len(text) else len(text) - 1
        reason = text[at] if text else "failed"
        self._print("FAIL %s: %s" % (self._name(test), reason))
        for line in text[-25:]:
            self._print("     | " + line)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._failed(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._failed(test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._print("SKIP %s: %s" % (self._name(test), reason))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.failed += 1
        self._print("FAIL %s: unexpected success" % self._name(test))


def main():
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
    suite = unittest.defaultTestLoader.discover(HERE, pattern=pattern, top_level_dir=HERE)
    result = LineResult()
    suite.run(result)
    return 1 if result.failed or result.testsRun == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
