"""The example of clients/python/README.md, and the study loop of the
repository's README.md, run as written (only the daemon's URL replaced by
the one under test)."""

import contextlib
import io
import os
import re
import unittest

import support
from support import need_daemon, need_numpy

README = os.path.join(support.PACKAGE_ROOT, "README.md")
TOP_README = os.path.join(os.path.dirname(os.path.dirname(support.PACKAGE_ROOT)), "README.md")
README_URL = "http://127.0.0.1:8080"


def python_blocks():
    with open(README, encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


@need_daemon
@need_numpy
class ReadmeTest(unittest.TestCase):
    def test_example_runs(self):
        blocks = python_blocks()
        self.assertTrue(blocks, "no python block in README.md")
        out = io.StringIO()
        scope = {"__name__": "readme_example"}
        for block in blocks:
            self.assertIn(README_URL, block)
            code = compile(block.replace(README_URL, support.URL), README, "exec")
            with contextlib.redirect_stdout(out):
                exec(code, scope)
        text = out.getvalue()
        self.assertIn("422 invalid_data X[0]", text)
        self.assertEqual(scope["draws"].shape, (2, 3))
        self.assertEqual(scope["clf"].classes_.tolist(), ["down", "up"])
        self.assertEqual(scope["multi"].classes_.tolist(), [0, 1, 2])
        self.assertIn("softmax", text)       # multi's likelihood, printed before the delete
        # the study: 25 trials of Branin (minimum 0.397887), then two by hand
        self.assertLess(scope["best"].value, 1.0, text)
        self.assertRegex(text, r"\n27 trials;")

    def test_top_readme_study_example_runs(self):
        """The study loop of the repository's README.md (its Python block
        that calls create_study) runs as written."""
        with open(TOP_README, encoding="utf-8") as f:
            blocks = [b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S)
                      if "create_study" in b]
        self.assertEqual(len(blocks), 1, "README.md: one python block with create_study")
        self.assertIn(README_URL, blocks[0])
        out = io.StringIO()
        scope = {"__name__": "readme_study"}
        code = compile(blocks[0].replace(README_URL, support.URL), TOP_README, "exec")
        with contextlib.redirect_stdout(out):
            exec(code, scope)
        self.assertIn("best", out.getvalue())
        self.assertIsNotNone(scope["study"].name)


if __name__ == "__main__":
    unittest.main()
