"""The package list of xlapy's wheel (everything else is in pyproject.toml).

The benchmark suite stays where it is developed, benchmarks/ at the top of the source tree,
and ships inside the wheel as the package ``xlapy._benchmarks`` (suite.py, make_hlo.py, the
other bench scripts, and the committed jax dumps hlo/*.hlo), so ``xlapy bench`` runs from an
installed xlapy; xlapy/cli/bench_cmd.py looks there first, then beside a source checkout.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["xlapy", "xlapy.*"]) + ["xlapy._benchmarks"],
    package_dir={"xlapy._benchmarks": "benchmarks"},
    package_data={"xlapy._benchmarks": ["hlo/*.hlo", "*.md"]},
)
