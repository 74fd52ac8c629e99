"""Small hand-built taxonomies and graphs shared by the taxonomy tests."""

from workbench.taxonomy.model import Concept, Taxonomy


def hand_taxonomy() -> Taxonomy:
    """places -> {water -> {river -> {nile, danube}, lake}, mountain -> {volcano}};
    people -> {scientist -> {physicist -> {einstein}}}."""
    c = [
        Concept("places", "places", parent=None, root="places"),
        Concept("water", "body of water", parent="places", root="places"),
        Concept("river", "river", parent="water", root="places"),
        Concept("nile", "Nile", kind="instance", parent="river", root="places"),
        Concept("danube", "Danube", kind="instance", parent="river", root="places"),
        Concept("lake", "lake", parent="water", root="places"),
        Concept("mountain", "mountain", parent="places", root="places"),
        Concept("volcano", "volcano", parent="mountain", root="places"),
        Concept("people", "people", parent=None, root="people"),
        Concept("scientist", "scientist", parent="people", root="people"),
        Concept("physicist", "physicist", parent="scientist", root="people"),
        Concept("einstein", "Albert Einstein", kind="instance", parent="physicist", root="people"),
    ]
    return Taxonomy.from_concepts(c, name="hand")


class DictGraph:
    """A knowledge graph held in dicts (for builder tests)."""

    source = "dict"

    def __init__(self, subclasses, instances=None, familiarity=None):
        self._sub = subclasses
        self._inst = instances or {}
        self._fam = familiarity or {}

    def name(self, node):
        return node.replace("_", " ")

    def gloss(self, node):
        return ""

    def subclasses(self, node):
        return list(self._sub.get(node, []))

    def instances(self, node):
        return list(self._inst.get(node, []))

    def familiarity(self, node):
        return self._fam.get(node, 0.0)
