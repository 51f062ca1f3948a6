#!/usr/bin/python3
"""Drives spanprof serve's web UI in Debian's headless chromium (through
chromium-driver and python3-selenium) the way a newcomer would, and prints
what it saw as one JSON object for t/85-serve-ui.t to check: "steps" names
each step that went through, in order, and "done" is true only when every
step of the plan ran (a test checks both: no JSON, or a short list, fails).

Usage: serve_ui.py UI_URL SCREENSHOT_DIR HOT_FUNCTION [EVIL_ROUTE]

Steps: the search page, "Find traces" (slowest first), the first row (the
slowest trace), its span with the most CPU samples (three clicks to the
flame graph), a click on a narrow frame (zoom), a search for HOT_FUNCTION,
a hover on it, the route's diff page, and, given EVIL_ROUTE, a page
listing that route's span whose name is markup.
"""
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

url, shots, hot = sys.argv[1], sys.argv[2], sys.argv[3]
evil_route = sys.argv[4] if len(sys.argv) > 4 else None
PLAN = ['search', 'trace', 'flame', 'zoom', 'find', 'hover', 'diff', 'worker']
if evil_route is not None:
    PLAN.append('escaped')
out = {'plan': PLAN, 'steps': [], 'done': False}


def step(name):
    """Step name went through (called at its end)."""
    out['steps'].append(name)

opts = Options()
for a in ('--headless=new', '--no-sandbox', '--disable-gpu',
          '--disable-dev-shm-usage', '--window-size=1400,1000'):
    opts.add_argument(a)
opts.binary_location = '/usr/bin/chromium'
drv = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts)
wait = WebDriverWait(drv, 20)


def settle(cond, timeout=5):
    """Waits for what a click draws; a time-out is left to the test's own
    check of what was measured."""
    try:
        WebDriverWait(drv, timeout).until(cond)
    except TimeoutException:
        pass


def shot(name):
    drv.save_screenshot('%s/%s.png' % (shots, name))


def frames():
    return drv.find_elements(By.CSS_SELECTOR, '#flame .frame')


try:
    drv.get(url)
    wait.until(EC.element_to_be_clickable((By.ID, 'find')))
    shot('1-search')
    clicks = 0
    # The page lists the slowest traces as it opens: let that list arrive
    # first, then "Find traces" renders the page again (a new hash), and
    # only rows of that new list are read (rows found in the first list
    # went stale under the script: t/87 failed 1 run in 20 so).
    wait.until(EC.presence_of_element_located((By.ID, 'traces')))
    first_list = drv.find_element(By.ID, 'traces')
    drv.find_element(By.ID, 'find').click()
    wait.until(EC.staleness_of(first_list))
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr.trace-row')))
    rows = drv.find_elements(By.CSS_SELECTOR, 'tr.trace-row')
    out['rows'] = len(rows)
    out['first_row'] = rows[0].text
    step('search')
    rows[0].click()
    clicks += 1
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr.span-row')))
    shot('2-trace')
    out['trace_url'] = drv.current_url
    spans = drv.find_elements(By.CSS_SELECTOR, 'tr.span-row')
    out['span_rows'] = [s.text for s in spans]
    # The span with the most CPU samples, as the page invites.
    best = max(spans, key=lambda s: int(s.get_attribute('data-samples') or 0))
    out['span_clicked'] = best.text
    step('trace')
    best.click()
    clicks += 1
    wait.until(lambda d: len(frames()) > 0)
    shot('3-flame')
    out['clicks_to_flame'] = clicks
    out['flame_title'] = drv.find_element(By.ID, 'flame-title').text
    graph_w = drv.find_element(By.ID, 'flame').size['width']
    names = {}
    for f in frames():
        n = f.get_attribute('data-name')
        names[n] = max(names.get(n, 0), f.size['width'])
    out['frame_widths'] = names
    out['graph_width'] = graph_w
    step('flame')

    # Zoom: click a narrow frame (under half the width); it then spans
    # the width, and its ancestors too.
    narrow = [f for f in frames() if 3 < f.size['width'] < graph_w / 2]
    out['zoom_found'] = bool(narrow)
    if narrow:
        name = narrow[0].get_attribute('data-name')
        out['zoom_name'] = name
        out['zoom_before'] = narrow[0].size['width']
        narrow[0].click()

        def zoomed_width():
            after = [f for f in frames() if f.get_attribute('data-name') == name]
            return max([f.size['width'] for f in after] or [0])
        # The click redraws the graph: wait for the frame to widen.
        settle(lambda d: zoomed_width() > out['zoom_before'])
        out['zoom_after'] = zoomed_width()
        shot('4-zoom')
        drv.find_element(By.ID, 'flame-reset').click()
        settle(lambda d: any(f.get_attribute('data-name') == name
                             and f.size['width'] <= out['zoom_before'] + 1
                             for f in frames()))
    step('zoom')

    # Search: matching frames highlighted, their share summed.
    box = drv.find_element(By.ID, 'flame-search')
    box.send_keys(hot)
    settle(lambda d: d.find_element(By.ID, 'flame-matched').text != '')
    out['matched_text'] = drv.find_element(By.ID, 'flame-matched').text
    out['highlighted'] = len(drv.find_elements(By.CSS_SELECTOR, '#flame .frame.match'))
    shot('5-search')
    step('find')

    # Hover: a tooltip with total and self CPU.
    f0 = [f for f in frames() if f.get_attribute('data-name') == hot]
    if f0:
        ActionChains(drv).move_to_element(f0[0]).perform()
        settle(lambda d: d.find_element(By.ID, 'tip').text != '')
        out['tooltip'] = drv.find_element(By.ID, 'tip').text
    step('hover')

    # The route's diff: slow against fast requests.
    drv.get(out['trace_url'])
    wait.until(EC.element_to_be_clickable((By.ID, 'route-diff')))
    drv.find_element(By.ID, 'route-diff').click()
    wait.until(EC.presence_of_element_located((By.ID, 'diff-title')))
    wait.until(lambda d: len(frames()) > 0)
    out['diff_title'] = drv.find_element(By.ID, 'diff-title').text
    out['diff_colours'] = sorted(set(f.value_of_css_property('background-color') for f in frames()))
    shot('6-diff')
    step('diff')

    # A worker's whole profile: the samples of no request shown as such.
    drv.find_element(By.ID, 'workers-link').click()
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, 'tr.worker-row')))
    wrow = drv.find_element(By.CSS_SELECTOR, 'tr.worker-row')
    out['worker_row'] = wrow.text
    wrow.click()
    wait.until(lambda d: len(frames()) > 0)
    # All of them: a cut (it was [:200], sorted) could drop '[no request]'
    # behind 200 '0x...' address frames.
    out['worker_frames'] = sorted(set(f.get_attribute('data-name') for f in frames()))
    shot('7-worker')
    step('worker')

    # Markup in a span name is shown as text.
    if evil_route is None:
        raise StopIteration
    drv.get(url + '#/?route=' + evil_route)
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr.trace-row')))
    out['evil_cell'] = drv.find_element(By.CSS_SELECTOR, 'tr.trace-row td.span-name').text
    out['pwned'] = drv.execute_script('return window.pwned === 1')
    out['script_elements'] = drv.execute_script(
        'return document.querySelectorAll("main script").length')
    shot('8-escaped')
    step('escaped')
except StopIteration:
    pass
except Exception as e:  # reported, not raised: the test says which step failed
    out['error'] = '%s: %s' % (type(e).__name__, e)
    try:
        shot('error')
    except Exception:
        pass
finally:
    drv.quit()

out['done'] = 'error' not in out and out['steps'] == PLAN
print(json.dumps(out))
