package bicep

import (
	"bytes"
	"fmt"
	"html/template"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pseudotrigger/pseudotrigger/internal/testenv"
)

// workbookChart is one chart of modules/workbook.bicep: its title and its query's summarize line.
type workbookChart struct {
	Title, Summarize, Name string
}

// workbookTable is the workbook's last-tick table: its title and its columns.
type workbookTable struct {
	Title   string
	Columns []string
}

// workbookLayout reads the workbook's items from modules/workbook.bicep as the portal lays them
// out: the title text, the two parameters with their defaults, the last-tick table, then each
// chart, full width, in the order of the charts list.
func workbookLayout(t *testing.T) (title string, params []string, table workbookTable, charts []workbookChart) {
	t.Helper()
	wb := read(t, "modules/workbook.bicep")
	m := regexp.MustCompile(`json: '## \$\{name\}: (.*?)\\n(.*?)'\n`).FindStringSubmatch(wb)
	if m == nil {
		t.Fatal("modules/workbook.bicep: no title item")
	}
	title = "## orders-app: " + m[1] + "\n" + strings.ReplaceAll(m[2], `\'`, "'")
	for _, l := range regexp.MustCompile(`label: '([^']+)'`).FindAllStringSubmatch(wb, -1) {
		params = append(params, l[1])
	}
	queries := map[string]string{}
	for _, q := range regexp.MustCompile(`(?s)var (\w+Query) = (?:replace\()?'''(.*?)'''`).FindAllStringSubmatch(wb, -1) {
		for _, line := range strings.Split(q[2], "\n") {
			if strings.HasPrefix(line, "| summarize ") {
				queries[q[1]] = strings.TrimPrefix(line, "| ")
			}
			// The table's columns: those its project names, then those each extend after it adds.
			if q[1] == "lastTickQuery" {
				if p, ok := strings.CutPrefix(line, "| project "); ok {
					table.Columns = nil
					for _, c := range strings.Split(regexp.MustCompile(`\([^()]*\)`).ReplaceAllString(p, "()"), ", ") {
						name, _, _ := strings.Cut(c, " = ")
						table.Columns = append(table.Columns, name)
					}
				}
				if e, ok := strings.CutPrefix(line, "| extend "); ok && table.Columns != nil {
					name, _, _ := strings.Cut(e, " = ")
					table.Columns = append(table.Columns, name)
				}
			}
		}
	}
	if m := regexp.MustCompile(`name: 'last-tick'\n\s+content: \{\n\s+version: '[^']+'\n\s+title: '((?:[^'\\]|\\')*)'\n\s+query: lastTickQuery\n`).FindStringSubmatch(wb); m != nil {
		table.Title = strings.ReplaceAll(m[1], `\'`, "'")
	}
	for _, c := range regexp.MustCompile(`name: '([-\w]+)'\n\s+title: '((?:[^'\\]|\\')*)'\n\s+query: (\w+)`).FindAllStringSubmatch(wb, -1) {
		charts = append(charts, workbookChart{Name: c[1], Title: strings.ReplaceAll(c[2], `\'`, "'"), Summarize: queries[c[3]]})
	}
	return title, params, table, charts
}

var layoutPage = template.Must(template.New("wb").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>workbook layout</title>
<style>
body { font: 13px "Segoe UI", system-ui, sans-serif; margin: 0; background: #fff; color: #323130; }
.bar { background: #f3f2f1; padding: 8px 16px; border-bottom: 1px solid #edebe9; color: #605e5c; }
h2 { font-size: 20px; font-weight: 600; margin: 16px 16px 4px; }
p.lead { margin: 0 16px 12px; }
.params { display: flex; gap: 16px; margin: 0 16px 12px; }
.param { border: 1px solid #8a8886; padding: 4px 8px; min-width: 180px; }
.param b { display: block; font-size: 11px; color: #605e5c; font-weight: 600; }
.chart { margin: 0 16px 14px; border: 1px solid #edebe9; padding: 10px 12px; }
.chart h3 { font-size: 14px; margin: 0 0 6px; font-weight: 600; }
.chart svg { display: block; width: 100%; height: 120px; }
.chart code { color: #605e5c; font-size: 11px; }
.axis { stroke: #c8c6c4; }
.placeholder { fill: #0078d4; fill-opacity: .08; stroke: #0078d4; stroke-dasharray: 4 3; }
.note { fill: #605e5c; font-size: 12px; }
table { border-collapse: collapse; width: 100%; }
th { text-align: left; font-weight: 600; font-size: 12px; border-bottom: 1px solid #c8c6c4; padding: 4px 6px; }
td.cell { height: 18px; border-bottom: 1px solid #edebe9; }
</style></head>
<body>
<div class="bar">Workbook layout drawn from infra/bicep/modules/workbook.bicep (not the portal's rendering: no data)</div>
<h2>{{.Heading}}</h2>
<p class="lead">{{.Lead}}</p>
<div class="params">{{range .Params}}<div class="param"><b>{{.Label}}</b>{{.Value}} &#9662;</div>{{end}}</div>
<section class="chart" id="last-tick"><h3>{{.Table.Title}}</h3>
<table><tr>{{range .Table.Columns}}<th>{{.}}</th>{{end}}</tr>
<tr>{{range .Table.Columns}}<td class="cell"></td>{{end}}</tr><tr>{{range .Table.Columns}}<td class="cell"></td>{{end}}</tr></table></section>
{{range .Charts}}<section class="chart" id="chart-{{.Name}}"><h3>{{.Title}}</h3>
<svg viewBox="0 0 1000 120" preserveAspectRatio="none"><rect class="placeholder" x="40" y="8" width="950" height="96"/>
<line class="axis" x1="40" y1="104" x2="990" y2="104"/><line class="axis" x1="40" y1="8" x2="40" y2="104"/>
<text class="note" x="515" y="60" text-anchor="middle">time chart: a line per poller</text></svg>
<code>{{.Summarize}}</code></section>
{{end}}</body></html>`))

// domText escapes text as Chromium's DOM dump serializes it.
var domText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// TestWorkbookLayoutInChromium draws the workbook's layout from its template (its title, its
// parameters, the last-tick table's title and columns, each chart's title and the summarize its
// query charts) and screenshots it in headless Chromium: the table first, with the time since the
// last tick, then every chart, in order. WORKBOOK_SCREENSHOT=file.png keeps a copy
// (docs/img/workbook-layout.png is one). No Azure subscription runs here, so this is the
// layout, not the portal's rendering of data.
func TestWorkbookLayoutInChromium(t *testing.T) {
	title, params, table, charts := workbookLayout(t)
	if len(params) != 2 || len(charts) != 6 {
		t.Fatalf("the workbook has parameters %v and %d charts, want 2 and 6", params, len(charts))
	}
	if table.Title == "" || strings.Join(table.Columns, ",") != "poller,period_seconds,last_tick,last_outcome,since_last_tick_seconds,periods_since_last_tick" {
		t.Fatalf("the last-tick table: %q, columns %v", table.Title, table.Columns)
	}
	for _, c := range charts {
		if c.Summarize == "" {
			t.Fatalf("chart %s: no summarize line in its query", c.Name)
		}
	}
	bin := testenv.Chromium(t)
	heading, lead, _ := strings.Cut(strings.TrimPrefix(title, "## "), "\n")
	type param struct{ Label, Value string }
	var page bytes.Buffer
	if err := layoutPage.Execute(&page, map[string]any{
		"Heading": heading, "Lead": lead, "Charts": charts, "Table": table,
		"Params": []param{{params[0], "Last 24 hours"}, {params[1], "All"}},
	}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "workbook.html")
	if err := os.WriteFile(file, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(testenv.RunChromium(t, bin, "file://"+file, "--dump-dom"))
	at := strings.Index(dom, `<section class="chart" id="last-tick"><h3>`+domText.Replace(table.Title)+`</h3>`)
	if at < 0 || !strings.Contains(dom[at:], "<th>since_last_tick_seconds</th>") || at > strings.Index(dom, `id="chart-`) {
		t.Fatalf("the last-tick table is not laid out before the charts:\n%s", testenv.Tail(dom, 2000))
	}
	for _, c := range charts {
		i := strings.Index(dom[at:], fmt.Sprintf(`<section class="chart" id="chart-%s"><h3>%s</h3>`, c.Name, domText.Replace(c.Title)))
		if i < 0 {
			t.Fatalf("chart %s is not laid out after the one before it:\n%s", c.Name, testenv.Tail(dom, 2000))
		}
		at += i
	}
	shot := filepath.Join(t.TempDir(), "workbook.png")
	testenv.RunChromium(t, bin, "file://"+file, "--hide-scrollbars", "--window-size=1100,1480", "--screenshot="+shot)
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if keep := os.Getenv("WORKBOOK_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", keep)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	// The charts' areas are the portal's blue (#0078d4) at 8% on white (#ebf4fc): six of them,
	// each about 990 by 95 pixels, were painted.
	blue := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if near(r>>8, 0xeb) && near(g>>8, 0xf4) && near(b>>8, 0xfc) {
				blue++
			}
		}
	}
	if blue < 6*90_000 {
		t.Errorf("the screenshot shows %d pixels of the charts' areas, want at least 540,000 (six whole charts)", blue)
	}
}

func near(v, want uint32) bool { return v+4 >= want && v <= want+4 }
