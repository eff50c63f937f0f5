"""`Commits`: the store's commits reach the event loop once per writer group, every committed answer is told
once, a failed one never, and `settled()` returns only when all were seen (issue 32 point 9)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import threading

from gwlab.frames.run.lifecycle import Commits

Future = concurrent.futures.Future


def test_every_committed_answer_is_told_once_and_a_failed_one_never() -> None:
    async def main() -> list[int]:
        told: list[int] = []
        commits = Commits(told.append)
        futures = [Future[None]() for _ in range(6)]
        for job, stored in enumerate(futures):
            commits.watch(job, stored)

        def writer() -> None:
            for job, stored in enumerate(futures):
                stored.set_running_or_notify_cancel()
                stored.set_exception(OSError("disk full")) if job == 3 else stored.set_result(None)

        threading.Thread(target=writer).start()
        await asyncio.wait_for(commits.settled(), 10)
        return told

    assert sorted(asyncio.run(main())) == [0, 1, 2, 4, 5]


def test_a_group_committed_while_the_loop_is_busy_wakes_it_once() -> None:
    async def main() -> tuple[int, list[int]]:
        loop = asyncio.get_running_loop()
        wakes = 0
        schedule = loop.call_soon_threadsafe

        def counted(*args: object) -> object:
            nonlocal wakes
            wakes += 1
            return schedule(*args)  # type: ignore[arg-type]  # the loop's own, as it was given

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]  # count the writer's wake-ups
        told: list[int] = []
        commits = Commits(told.append)
        futures = [Future[None]() for _ in range(50)]
        for job, stored in enumerate(futures):
            commits.watch(job, stored)
        # the whole group is resolved while the loop cannot run (this thread joins the writer)
        writer = threading.Thread(target=lambda: [f.set_result(None) for f in futures])
        writer.start()
        writer.join()
        await asyncio.wait_for(commits.settled(), 10)
        return wakes, told

    wakes, told = asyncio.run(main())
    assert wakes == 1 and sorted(told) == list(range(50))


def test_no_commit_is_left_unseen_when_the_writer_races_the_loop() -> None:
    """Answers resolved one by one at random moments while the loop drains: each is told exactly once."""
    async def main() -> list[int]:
        told: list[int] = []
        commits = Commits(told.append)
        futures = [Future[None]() for _ in range(2000)]
        for job, stored in enumerate(futures):
            commits.watch(job, stored)
        rng = random.Random(7)

        def writer() -> None:
            for stored in futures:
                stored.set_result(None)
                if rng.random() < 0.05:
                    threading.Event().wait(0.0005)

        threading.Thread(target=writer).start()
        await asyncio.wait_for(commits.settled(), 10)  # a commit left unseen would never settle
        return told

    assert sorted(asyncio.run(main())) == list(range(2000))
