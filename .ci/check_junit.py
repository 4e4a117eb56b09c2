"""Fails CI when the test run did nothing: no tests collected, or every test skipped."""

import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
total = sum(int(s.get("tests", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
ran = total - skipped
print(f"junit: {total} collected, {ran} ran, {skipped} skipped, {failed} failed")
if total == 0 or ran == 0 or failed:
    sys.exit("CI: the test run collected or ran no tests, or some failed")
