"""The Decoding page's first visit at a large model's size, with beam search and sampling behind their buttons
(prints figures; never a test).

    python bench/bench_decoding_page.py --models-dir DIR --model nllb-600M [--text "Where is the train station?"]
        [--threads 2]

Server time under streamlit.testing's AppTest, in this process: the Model page (the model loaded), the
Tokenization page (the shared greedy translation and its trace, which Decoding shows as its greedy column), then
the Decoding page's first visit, each of its two buttons, and a warm rerun. ``--models-dir`` is a folder of links
to the stand-ins that bench/bench_families.py writes (NLLB-600M: 2.3 GB of float32 weights, loaded once).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", required=True, help="folder of checkpoint folders (links to the stand-ins)")
    parser.add_argument("--model", default="nllb-600M")
    parser.add_argument("--text", default="Where is the train station?")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)  # this benchmark's own process
    from ui.state import settings

    os.environ[settings.MODELS_DIR_ENV] = args.models_dir
    os.chdir(ROOT)
    import app_helpers

    def timed(what: str, run) -> object:  # noqa: ANN001
        start = time.perf_counter()
        at = run()
        print(f"{what}: {time.perf_counter() - start:.2f} s", *[e.value for e in at.exception], flush=True)
        return at

    at = timed("Model page (the model loaded)",
               lambda: app_helpers.open_page("1_model", args.text, args.model, timeout=600))
    timed("Tokenization page (the shared greedy translation)",
          lambda: at.switch_page("pages/2_tokenization.py").run(timeout=600))
    timed("Decoding, first visit", lambda: at.switch_page("pages/9_decoding.py").run(timeout=600))
    print("waiting:", *[b.key for b in at.button if (b.key or "").startswith("dec_run_")])
    timed("the beam search button", lambda: at.button(key="dec_run_beam").click().run(timeout=600))
    timed("the sampling button", lambda: at.button(key="dec_run_sampling").click().run(timeout=600))
    timed("a warm rerun", lambda: at.run(timeout=600))


if __name__ == "__main__":
    main()
