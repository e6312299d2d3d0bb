"""A task run every ``interval`` seconds in a daemon thread, until stopped."""

import threading


class PeriodicTask:
    """Calls :meth:`run_once` every ``interval`` seconds (the first call one interval after
    :meth:`start`); ``run_once`` must log its own errors, the loop never sees one."""

    #: The thread's name, as ``ps -L`` and tracebacks show it.
    thread_name = "periodic-task"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> list[str]:
        """One pass; the UUIDs of the nodes it acted on."""
        raise NotImplementedError

    def start(self) -> None:
        """Run in a daemon thread."""
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_once()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the loop and wait (up to ``timeout``) for a running pass to finish."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
