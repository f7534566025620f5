"""The operator's view in Chromium (issue 37): the navigation's four groups, the current
page marked as one follows its links, and the Policy page's zone-pair matrix of the lab's
policy (webui/policy/examples/tusk.yaml) - nothing of it blocked by the
Content-Security-Policy (the page fixture fails a test whose pages logged a violation)."""
from playwright.sync_api import expect


def test_the_navigation_groups_pages_by_task_and_follows_the_operator(admin, tusk):
    page = admin
    groups = page.locator("header nav .nav-group-name")
    expect(groups).to_have_text(["Watch", "Configure", "Diagnose", "Administer"])
    expect(page.locator('header nav a[aria-current="page"]')).to_have_text("Dashboard")
    for label, heading in (("History", "Revision history"), ("Self-test", "Self-test"),
                           ("Users", "Users"), ("Policy", "Policy")):
        page.locator("header nav a", has_text=label).first.click()
        expect(page.locator('header nav a[aria-current="page"]')).to_have_text(label)
        expect(page.locator("h1")).to_contain_text(heading)
    # a page under the Policy's address keeps Policy current
    page.goto(tusk[0] + "/policy/classes/")
    expect(page.locator('header nav a[aria-current="page"]')).to_have_text("Policy")


def test_the_policy_page_shows_which_classes_apply_between_each_pair_of_zones(admin, tusk):
    page = admin
    page.goto(tusk[0] + "/policy/")
    matrix = page.locator("#zone-matrix")
    expect(matrix).to_be_visible()
    expect(matrix.locator('th[scope="col"]')).to_have_text(["inside", "outside"])
    cell = matrix.locator('tr[data-from="inside"] td[data-to="outside"]')
    expect(cell.locator("li a")).to_have_text(["bulk-copy", "admin", "diagnostics",
                                               "inside-rest"])
    expect(matrix.locator('tr[data-from="outside"] td[data-to="inside"]')).to_have_text(
        "default deny")
    cell.locator("li a", has_text="admin").click()
    expect(page.locator("#id_name")).to_have_value("admin")
