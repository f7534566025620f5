"""A YAML bomb posted to the policy import page (issue 16): 600 bytes of anchors and
aliases that once expanded to 387 million strings and a page of hundreds of MB. It is
refused like any malformed file - a clear error, a small page, the draft unchanged."""
import pytest
from yamlbomb import bomb

from policy import draft as drafts


@pytest.mark.parametrize("levels", [6, 9])
def test_a_yaml_bomb_is_refused_with_a_small_page(admin_client, levels):
    before = drafts.get_meta().version
    response = admin_client.post("/policy/import/", {"text": bomb(levels)})
    assert response.status_code == 400
    assert len(response.content) < 200_000, len(response.content)
    assert ("not valid YAML at line 1, column 4: anchors and aliases (&amp;name, *name) are "
            "not accepted") in response.content.decode()
    assert drafts.get_meta().version == before
