"""Responses to the unknown (UnknownBench-style): datasets, measures, calibration."""

from workbench.unknown.datasets import (
                                        TASKS,
                                        UnknownDataset,
                                        UnknownItem,
                                        build_unknown_dataset,
                                        load_unknownbench,
                                        save_unknown_dataset,
)
from workbench.unknown.measures import (
                                        PROMPTS,
                                        NumberConfidence,
                                        UnknownPrompts,
                                        by_confidence,
                                        evaluate_unknown,
                                        expected_calibration_error,
                                        get_prompts,
                                        lexical_match,
                                        next_token_entropy,
                                        number_confidence,
                                        parse_confidence,
                                        prompt_perplexity,
                                        run_unknown,
                                        summarize_unknown,
                                        default_detector,
)

__all__ = [
    "NumberConfidence", "PROMPTS", "UnknownPrompts", "get_prompts", "number_confidence", "run_unknown",
    "TASKS", "UnknownDataset", "UnknownItem", "build_unknown_dataset", "by_confidence",
    "evaluate_unknown", "expected_calibration_error", "lexical_match", "load_unknownbench",
    "next_token_entropy", "parse_confidence", "prompt_perplexity", "save_unknown_dataset",
    "summarize_unknown", "default_detector",
]
