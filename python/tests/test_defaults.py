"""What a check does when it is not told is the program's default too: one value in the engine,
read by Python through the C API."""
import re
import subprocess

import pytest

import nvfp4check as nc
from nvfp4check import driver

from conftest import program


def test_a_check_lasts_as_long_as_a_run_of_the_program():
    exe = program()
    if exe is None:
        pytest.skip("no nvfp4check program (NVFP4CHECK_PROGRAM)")
    help_text = subprocess.run([exe, "run", "--help"], capture_output=True, text=True, check=True).stdout
    seconds = float(re.search(r"default (\d+(?:\.\d+)?) without --cases", help_text).group(1))
    assert nc.DEFAULT_SECONDS == seconds


def test_cases_go_where_the_program_puts_them():
    assert driver.default("case_dir") == "nvfp4check-cases"
