"""``python -m workloads [locust arguments]``: Locust's own command line - the same arguments and
the same run as ``locust ...`` - except that ``--help`` also lists the options of the
locustfile(s) named with ``-f``::

    .venv/bin/python -m workloads -f workloads/kafka_produce.py --help

Why: Locust prints ``--help`` before it imports the locustfile (``parse_locustfile_option`` in
locust/argument_parser.py; locust issue #2917, closed without a fix), so the options a locustfile
registers (``init_command_line_parser``) are missing from ``locust -f FILE --help``, although
``locust -f FILE`` accepts them. Here, for ``--help``, the locustfiles are imported first, the way
Locust's ``main`` imports them, and Locust's full parser then prints the help; anything else goes
to Locust's ``main`` unchanged.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import locust  # noqa: F401  (first: Locust's gevent monkey-patching, as the `locust` script does)
    from locust import argument_parser as ap

    sys.argv = ["locust", *argv]
    # The parser Locust itself reads -f and -h with (same config files, same abbreviations).
    early = ap.get_empty_argument_parser(add_help=False)
    early.add_argument("-h", "--help", action="store_true", default=False)
    known, _ = early.parse_known_args(argv)
    if known.help and known.locustfile != "-":
        from locust.main import merge_locustfiles_content

        # Imports them: their init_command_line_parser listeners are registered.
        merge_locustfiles_content(ap.parse_locustfile_paths([f.strip() for f in known.locustfile.split(",")]))
        ap.get_parser().parse_args(argv)  # prints the help, with their options, and exits
        return 0
    from locust.main import main as locust_main

    return locust_main()


if __name__ == "__main__":
    sys.exit(main())
