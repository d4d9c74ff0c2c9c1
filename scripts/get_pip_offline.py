# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the get-pip script that ``ansible-test`` downloads from a host we cannot reach.

``make setup`` copies it to ``~/.ansible/test/cache/get_pip_<version>.py``. ansible-test runs it
inside each fresh sanity virtual environment with pip install arguments (for example
``--disable-pip-version-check pip==24.2 --no-setuptools --no-wheel``): pip is bootstrapped from
the interpreter's bundled ``ensurepip`` wheel, then the requested packages come from PyPI.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import subprocess
import sys

# get-pip.py flags that `pip install` does not know.
GET_PIP_ONLY_FLAGS = ('--no-setuptools', '--no-wheel')


def main():
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_FLAGS]
    subprocess.check_call([sys.executable, '-m', 'ensurepip', '--default-pip'])
    subprocess.check_call([sys.executable, '-m', 'pip', 'install'] + args)


if __name__ == '__main__':
    main()
