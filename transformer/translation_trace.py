"""``TranslationTrace``: everything the app shows about one translation (``Pipeline.trace`` returns it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .decoding import DecodeResult
from .network.trace import Trace


@dataclass(frozen=True)
class TranslationTrace:
    """Everything the app shows about one translation.

    ``trace`` is from one teacher-forced forward pass on (``src_ids``, BOS + ``output_ids``):
    decoder position t reads BOS y_1..y_t and predicts y_{t+1} (EOS at the last position
    when ``finished``). ``steps`` is the greedy (or sampled) decoding that produced the
    output, recorded step by step: batch of one, ``steps.steps[t].cross_attention[0]`` is
    (L, H, S).
    """

    src_text: str  # the text after cleaning: what was tokenized
    src_pieces: list[str]  # one per source id, "</s>" last
    src_ids: list[int]  # fed to the encoder: the tokens (after truncation), then EOS
    output_text: str
    output_pieces: list[str]  # one per output id
    output_ids: list[int]  # generated ids, without BOS and EOS
    finished: bool  # whether the decoder produced EOS within max_len
    trace: Trace  # the teacher-forced forward on (src_ids, BOS + output_ids)
    steps: DecodeResult  # decoding with record=True (batch of one)
    unknown_chars: list[str] = field(default_factory=list)  # source characters that became <unk>
    truncated: bool = False  # whether the source was cut to the model's max_len
    timed_out: bool = False  # whether the time budget stopped decoding (the output is the part produced)

    @property
    def decoder_ids(self) -> list[int]:
        """The decoder input of the traced forward: the start id (BOS; Marian: pad) + output_ids."""
        return self.trace["tgt.ids"][0].tolist()
