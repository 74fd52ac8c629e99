"""64 varied chat prompts shared by the benchmarks (questions of many lengths)."""

SUBJECTS = [
    "the Nile",
    "Mount Everest",
    "Charles Dickens",
    "the Eiffel Tower",
    "Toyota",
    "the Amazon rainforest",
    "Marie Curie",
    "the violin",
]
TEMPLATES = [
    "What is {}?",
    "Tell me something interesting about {}.",
    "Why is {} famous?",
    "Can you give me a short history of {} in a few sentences?",
    "I am writing a school report. What are three key facts about {} that I should mention?",
    "Explain {} to a ten-year-old.",
    "What would a tourist or a student most want to know about {}, and why?",
    "Summarize what you know about {}.",
]
PROMPTS = [t.format(s) for t in TEMPLATES for s in SUBJECTS]
assert len(PROMPTS) == 64
