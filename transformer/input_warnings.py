"""The warnings a pipeline gives about its input text, in one module that every pipeline can import
(``pipeline.Pipeline``, ``task_lm.TaskLMPipeline``) without importing another pipeline."""


class UnknownCharactersWarning(UserWarning):
    """Some source characters are not in the tokenizer's vocabulary and became <unk>."""


class TruncationWarning(UserWarning):
    """The source (its tokens + EOS) was longer than the model's max_len and was cut."""


class OutOfDomainWarning(UserWarning):
    """The source lies outside what the model's built-in task trained it on (``text.domains``)."""
