#!/usr/bin/python3
"""Drives spanprof serve's profile-type views in Debian's headless chromium
(chromium-driver, python3-selenium) and prints what it saw as one JSON
object for t/85-serve-ui.t; "steps" names every step it went through, in
order, and "error" the step it failed in.

Usage:
  serve_ui_types.py types UI_URL SHOTS TRACE_ID SPAN_ID HOT_FUNCTION
      the trace's waterfall (wall, CPU and off-CPU columns), the span's
      flame graph, its type selector switched to off_cpu then wall, the
      route's diff switched to off_cpu, the workers page without memory
  serve_ui_types.py memory UI_URL SHOTS PID
      the workers page's in-use memory of worker PID and its in-use flame
      graph

Every wait is for an element that carries the data (a row of the span, a
title naming the type chosen, the frames under it), never a fixed sleep.
"""
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

mode, url, shots = sys.argv[1], sys.argv[2], sys.argv[3]
out = {'steps': []}

opts = Options()
for a in ('--headless=new', '--no-sandbox', '--disable-gpu',
          '--disable-dev-shm-usage', '--window-size=1400,1000'):
    opts.add_argument(a)
opts.binary_location = '/usr/bin/chromium'
drv = webdriver.Chrome(service=Service('/usr/bin/chromedriver'), options=opts)
wait = WebDriverWait(drv, 20)


def step(name):
    out['steps'].append(name)


def shot(name):
    drv.save_screenshot('%s/%s.png' % (shots, name))


def css(sel):
    return drv.find_elements(By.CSS_SELECTOR, sel)


def frames():
    return css('#flame .frame')


def widths():
    w = {}
    for f in frames():
        n = f.get_attribute('data-name')
        w[n] = max(w.get(n, 0), f.size['width'])
    return w


def flame_of(title_id, typ):
    """Waits for the page of type typ: its title, then its frames."""
    wait.until(EC.presence_of_element_located(
        (By.CSS_SELECTOR, '#%s[data-type="%s"]' % (title_id, typ))))
    wait.until(lambda d: len(frames()) > 0)
    return drv.find_element(By.ID, title_id).text


def choose(typ):
    Select(drv.find_element(By.ID, 'type-select')).select_by_value(typ)


def types_steps(tid, sid, hot):
    step('trace')
    drv.get(url + '#/trace/' + tid)
    row_sel = 'tr.span-row[data-span="%s"]' % sid
    wait.until(lambda d: [r for r in css(row_sel + ' td.off-cpu') if r.text])
    out['waterfall_head'] = [h.text for h in css('#waterfall th')]
    row = css(row_sel)[0]
    out['row'] = {c: row.find_element(By.CSS_SELECTOR, 'td.' + c).text
                  for c in ('wall', 'cpu', 'off-cpu')}
    out['row_ns'] = {c: row.find_element(By.CSS_SELECTOR, 'td.' + c).get_attribute('data-ns')
                     for c in ('cpu', 'off-cpu')}
    shot('t1-waterfall')

    step('span-flame')
    row.click()
    out['cpu_title'] = flame_of('flame-title', 'cpu')
    out['cpu_total'] = drv.find_element(By.ID, 'flame-title').get_attribute('data-total')
    sel = drv.find_element(By.ID, 'type-select')
    out['type_options'] = [o.get_attribute('value') for o in sel.find_elements(By.TAG_NAME, 'option')]
    out['cpu_widths'] = widths()
    out['graph_width'] = drv.find_element(By.ID, 'flame').size['width']

    step('switch-off_cpu')
    choose('off_cpu')
    out['off_cpu_title'] = flame_of('flame-title', 'off_cpu')
    out['off_cpu_total'] = drv.find_element(By.ID, 'flame-title').get_attribute('data-total')
    out['off_cpu_widths'] = widths()
    out['off_cpu_url'] = drv.current_url
    shot('t2-off-cpu')

    step('switch-wall')
    choose('wall')
    out['wall_title'] = flame_of('flame-title', 'wall')
    out['wall_widths'] = widths()

    step('diff-off_cpu')
    drv.get(url + '#/trace/' + tid)
    wait.until(EC.element_to_be_clickable((By.ID, 'route-diff')))
    drv.find_element(By.ID, 'route-diff').click()
    flame_of('diff-title', 'cpu')
    choose('off_cpu')
    out['diff_title'] = flame_of('diff-title', 'off_cpu')
    out['diff_widths'] = widths()
    shot('t3-diff-off-cpu')

    step('workers-no-memory')
    drv.get(url + '#/workers')
    wait.until(EC.presence_of_element_located((By.ID, 'memory-none')))
    out['memory_none'] = drv.find_element(By.ID, 'memory-none').text
    out['memory_rows'] = len(css('tr.memory-row'))


def memory_steps(pid):
    step('workers-memory')
    drv.get(url + '#/workers')
    row_sel = 'tr.memory-row[data-pid="%s"]' % pid
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, row_sel)))
    row = css(row_sel)[0]
    out['memory_row'] = row.text
    out['memory_bytes'] = row.get_attribute('data-bytes')
    out['memory_points'] = row.get_attribute('data-points')
    out['memory_chart_points'] = len(
        (row.find_element(By.CSS_SELECTOR, 'svg.memory-chart polyline')
         .get_attribute('points') or '').split())
    out['memory_none'] = len(css('#memory-none'))
    shot('m1-workers-memory')

    step('memory-flame')
    row.find_element(By.CSS_SELECTOR, 'a.memory-flame').click()
    out['memory_title'] = flame_of('flame-title', 'inuse_space')
    out['memory_widths'] = widths()
    out['graph_width'] = drv.find_element(By.ID, 'flame').size['width']
    shot('m2-memory-flame')


try:
    if mode == 'types':
        types_steps(sys.argv[4], sys.argv[5], sys.argv[6])
    elif mode == 'memory':
        memory_steps(sys.argv[4])
    else:
        raise ValueError('mode: types or memory')
    step('done')
except Exception as e:  # reported, not raised: the test says which step failed
    out['error'] = '%s at step %s: %s' % (type(e).__name__,
                                          out['steps'][-1] if out['steps'] else '-', e)
    try:
        shot('error-' + mode)
    except Exception:
        pass
finally:
    drv.quit()

print(json.dumps(out))
