"""Voice replies' own cost: reading a spoken answer's Ogg/Opus (every page's CRC checked in
Python, the duration and waveform read) and cutting a long answer into parts.

The speech endpoint's time is the endpoint's; what squidd adds to a spoken answer is the
check and measurement of its audio (media/voice.py, in a worker thread) and the split of
the text. This reads a 60 s voice note (about what 4096 characters come to), made by
libsndfile's Opus encoder as the scripted endpoint makes it, and splits a 20,000-character
answer into 4096-character parts; both as medians of repeats, in ms.

    python bench/bench_voice.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.speech_server import ogg_opus_tone

from squidd.media.voice import read_ogg_opus, spoken_parts


def figures(repeats: int, seconds: float = 60.0) -> dict[str, float]:
    audio = ogg_opus_tone(seconds)
    answer = " ".join(f"Sentence {n} of a long answer, said plainly." for n in range(450))
    reads, splits = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        measured = read_ogg_opus(audio)
        reads.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        spoken_parts(answer, 4096)
        splits.append(time.perf_counter() - t0)
    assert abs(measured.duration_ms - seconds * 1000) <= 1
    return {
        "read_ms": statistics.median(reads) * 1000,
        "audio_kib": len(audio) / 1024,
        "read_ms_per_mib": statistics.median(reads) * 1000 / (len(audio) / 1024 / 1024),
        "split_ms": statistics.median(splits) * 1000,
        "answer_chars": float(len(answer)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    result = figures(parser.parse_args().repeats)
    print(
        f"read a 60 s voice note ({result['audio_kib']:.0f} KiB): {result['read_ms']:.1f} ms "
        f"({result['read_ms_per_mib']:.0f} ms/MiB); split {result['answer_chars']:.0f} "
        f"characters into parts: {result['split_ms']:.2f} ms"
    )


if __name__ == "__main__":
    main()
