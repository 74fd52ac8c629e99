"""Which knowledge-graph classes play SELECT's five root types, per source.

WordNet 3.0 (the shipped default) has no single synset per root type that a user would
recognise as a topic, so each root is anchored on a handful of familiar synsets (WordNet 3.0
offsets, stable for that release), which become the root's children:

| root | WordNet anchors |
| --- | --- |
| products | vehicle, musical instrument, clothing, food (solid food), beverage, furniture |
| people | scientist, writer, leader, athlete, entertainer, painter |
| places | body of water, geological formation, geographical area |
| organizations | company, institution (establishment), team, club, military unit, religion |
| creative works | literary composition, musical composition, movie, painting, dramatic composition, sculpture |
"""

from __future__ import annotations

from workbench.taxonomy.builder import RootSpec

WORDNET_ROOTS: tuple[RootSpec, ...] = (
    RootSpec(
        "root:products",
        "products",
        (
            "04524313",  # vehicle
            "03800933",  # musical instrument
            "03051540",  # clothing
            "07555863",  # food, solid food
            "07881800",  # beverage
            "03405725",  # furniture
        ),
    ),
    RootSpec(
        "root:people",
        "people",
        (
            "10560637",  # scientist
            "10794014",  # writer, author
            "09623038",  # leader
            "09820263",  # athlete
            "09616922",  # entertainer
            "10391653",  # painter
        ),
    ),
    RootSpec(
        "root:places",
        "places",
        (
            "09225146",  # body of water
            "09287968",  # geological formation
            "08574314",  # geographical area
        ),
    ),
    RootSpec(
        "root:organizations",
        "organizations",
        (
            "08058098",  # company
            "08053576",  # institution, establishment
            "08208560",  # team, squad
            "08227214",  # club, social club
            "08198398",  # military unit
            "08081668",  # religion
        ),
    ),
    RootSpec(
        "root:creative_works",
        "creative works",
        (
            "06364329",  # literary composition
            "07037465",  # musical composition
            "06613686",  # movie
            "03876519",  # painting
            "07007684",  # dramatic composition, dramatic work
            "04157320",  # sculpture
        ),
    ),
)
