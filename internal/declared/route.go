package declared

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/pseudotrigger/pseudotrigger/poller"
	"github.com/pseudotrigger/pseudotrigger/sink"
)

// Route is poller.json's "route", instead of "sink": each row goes to the sink that its
// column's value names, rows of other values (and NULL) to Default.
type Route struct {
	// Column is the column whose value picks the sink; the poller reads it.
	Column string `json:"column"`
	// Sinks are the sinks by value, the value as text: a string as it is, a number in decimal,
	// a boolean true or false.
	Sinks map[string]sink.Config `json:"sinks"`
	// Default, when set, gets the rows whose value has no sink, and those whose value is NULL.
	Default *sink.Config `json:"default,omitempty"`
}

// ErrNoRoute is wrapped by the error of a batch holding a row whose route column's value has no
// sink while the route has no default: the poller's poison policy ({P}_ON_POISON) then blocks
// the batch or dead-letters that row; it is never dropped.
var ErrNoRoute = errors.New("no route for the row")

// checkRoute checks poller.json's route: its column, that it has sinks, and that it is the only
// routing of the file (check checks each sink, named by its path: "route.sinks.order.url").
func (s Spec) checkRoute() error {
	r := s.Route
	if sinkSet(s.Sink) {
		return field("route", "replaces sink: a poller.json has one of them (route.default gets the rows no route.sinks value names)")
	}
	for i, t := range s.Source.Tables {
		if t.Sink != nil {
			return field("route", "and source.tables[%d].sink both say where rows go: use route (by a column's value) or the tables' sinks (by table), not both", i)
		}
	}
	if r.Column == "" {
		return field("route.column", "required: the column whose value picks the sink")
	}
	if len(r.Sinks) == 0 {
		return field("route.sinks", `required: the sinks by value, like {"order": {"type": "webhook", "url": "%%ORDER_HOOK%%"}}`)
	}
	return nil // each sink: check, through Sinks
}

// sinkSet says whether poller.json has a "sink" (a Spec decoded without one has the zero Config).
func sinkSet(c sink.Config) bool { return !reflect.ValueOf(c).IsZero() }

// target is one sink a router sends to: a table's, a value's, or the default.
type target struct {
	key  string // the table (as its rows name it) or the value; "" for the default
	path string // where poller.json defines it, for setup errors: "route.sinks.order"
	sink *sink.Sink
}

// router sends each row of a batch to the sink its key names (which), or to def (nil: none,
// and a row no sink takes fails the batch with ErrNoRoute). A batch's rows of one sink go to it
// in the batch's order; the sinks of one batch are sent to concurrently, and the batch is
// delivered only when every one of them confirmed.
type router struct {
	// column is the route's column; "" routes by table (source.tables[].sink).
	column  string
	targets []target // in the order String and setup name them
	byKey   map[string]*sink.Sink
	def     target // the sink of the rows no target takes (def.sink nil: none)
}

// newRouter builds the router sending by column ("": by table) to targets, the other rows to def.
func newRouter(column string, targets []target, def target) *router {
	r := &router{column: column, targets: targets, byKey: make(map[string]*sink.Sink, len(targets)), def: def}
	for _, t := range targets {
		r.byKey[t.key] = t.sink
	}
	return r
}

// tableRouter routes the rows of source.tables whose entry has a sink of its own to it, the
// others to the poller's sink.
func tableRouter(s Spec, def *sink.Sink) (*router, error) {
	var targets []target
	for i, t := range s.Source.Tables {
		if t.Sink == nil {
			continue
		}
		ts, err := sink.New(*t.Sink)
		if err != nil {
			return nil, err
		}
		targets = append(targets, target{key: t.name(), path: fmt.Sprintf("source.tables[%d].sink", i), sink: ts})
	}
	if len(targets) == 0 {
		return nil, nil
	}
	return newRouter("", targets, target{path: "sink", sink: def}), nil
}

// valueRouter is the router of poller.json's route.
func valueRouter(r *Route) (*router, error) {
	var targets []target
	for _, v := range slices.Sorted(maps.Keys(r.Sinks)) {
		s, err := sink.New(r.Sinks[v])
		if err != nil {
			return nil, err
		}
		targets = append(targets, target{key: v, path: "route.sinks." + v, sink: s})
	}
	def := target{path: "route.default"}
	if r.Default != nil {
		var err error
		if def.sink, err = sink.New(*r.Default); err != nil {
			return nil, err
		}
	}
	return newRouter(r.Column, targets, def), nil
}

// which is the sink of row (its table's, or its column's value's), or an ErrNoRoute error.
func (r *router) which(row poller.Row, outbox *poller.Outbox) (*sink.Sink, error) {
	var (
		key string
		ok  = true
	)
	if r.column == "" {
		key = row.Table()
	} else {
		key, ok = sink.ValueText(row.Get(r.column))
	}
	if ok {
		if s := r.byKey[key]; s != nil {
			return s, nil
		}
	}
	if r.def.sink != nil {
		return r.def.sink, nil
	}
	return nil, r.noRoute(row, outbox, key, ok)
}

// noRoute is the error of a row that no sink takes: the column, the value, the row (its key,
// and its event id in an outbox) and the fix.
func (r *router) noRoute(row poller.Row, outbox *poller.Outbox, value string, ok bool) error {
	key, _ := json.Marshal(row.Key())
	about := "the row with key " + string(key)
	if row.Table() != "" {
		about += " of " + row.Table()
	}
	if outbox != nil && outbox.ID != "" {
		if id, idOK := sink.ValueText(row.Get(outbox.ID)); idOK {
			about += fmt.Sprintf(" (event id %q)", id)
		}
	}
	if !ok {
		return fmt.Errorf("%w: route.column %s is NULL in %s, and the route has no default: add route.default to poller.json",
			ErrNoRoute, r.column, about)
	}
	return fmt.Errorf("%w: route.column %s is %q in %s, which route.sinks does not name, and the route has no default: add route.sinks.%q or route.default to poller.json",
		ErrNoRoute, r.column, value, about, value)
}

// send sends b's rows, each to its sink: every row's sink is found before anything is sent (a
// row no sink takes fails the batch with nothing sent), then each sink gets its rows, in the
// batch's order, concurrently with the others. It returns once every sink answered: nil when all
// confirmed, else their errors.
func (r *router) send(ctx context.Context, b *poller.Batch[poller.Row]) error {
	var order []*sink.Sink
	parts := map[*sink.Sink][]poller.Row{}
	for _, row := range b.Raw {
		s, err := r.which(row, b.Outbox)
		if err != nil {
			return err
		}
		if _, ok := parts[s]; !ok {
			order = append(order, s)
		}
		parts[s] = append(parts[s], row)
	}
	part := func(s *sink.Sink) *poller.Batch[poller.Row] {
		rows := parts[s]
		return &poller.Batch[poller.Row]{Poller: b.Poller, ID: b.ID, FencingToken: b.FencingToken, Attempt: b.Attempt,
			From: b.From, To: b.To, Tables: b.Tables, Rows: rows, Raw: rows, Outbox: b.Outbox}
	}
	if len(order) == 1 {
		return r.named(order[0], order[0].Send(ctx, part(order[0])))
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, s := range order {
		wg.Go(func() { errs[i] = r.named(s, s.Send(ctx, part(s))) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// named prefixes err with the place of s in poller.json ("route.sinks.order: ...").
func (r *router) named(s *sink.Sink, err error) error {
	if err == nil {
		return nil
	}
	path := r.def.path
	for _, t := range r.targets {
		if t.sink == s {
			path = t.path
		}
	}
	return fmt.Errorf("%s: %w", path, err)
}

// setup sets every sink up; an error names the sink's place in poller.json.
func (r *router) setup(getenv func(string) string) error {
	for _, t := range append(slices.Clone(r.targets), r.def) {
		if t.sink == nil {
			continue
		}
		if err := t.sink.Setup(getenv); err != nil {
			return fmt.Errorf("%s: %w", t.path, err)
		}
	}
	return nil
}

// String names each route's sink: "route aggregate_type: order to POST https://...; payment to
// queue payments (...); default to ...", or, by table, the poller's sink then each table's.
func (r *router) String() string {
	var parts []string
	if r.column == "" {
		parts = append(parts, r.def.sink.String())
		for _, t := range r.targets {
			parts = append(parts, t.key+" to "+t.sink.String())
		}
		return strings.Join(parts, "; ")
	}
	for _, t := range r.targets {
		v := t.key
		if v == "" {
			v = `""`
		}
		parts = append(parts, v+" to "+t.sink.String())
	}
	if r.def.sink != nil {
		parts = append(parts, "default to "+r.def.sink.String())
	}
	return "route " + r.column + ": " + strings.Join(parts, "; ")
}

// columns is the route's column as a list, for the columns the poller reads (nil: no route).
func (r *Route) columns() []string {
	if r == nil {
		return nil
	}
	return []string{r.Column}
}

// sinkField is the path of a field of a route's sink that a JSON type error names without the
// sink's value ("route.sinks.concurrency"): "route.sinks.order.concurrency", the first sink in
// value order whose object does not decode. Other paths are returned as they are.
func sinkField(data []byte, path string) string {
	rest, ok := strings.CutPrefix(path, "route.sinks.")
	if !ok {
		return path
	}
	var doc struct {
		Route struct {
			Sinks map[string]json.RawMessage `json:"sinks"`
		} `json:"route"`
	}
	_ = json.Unmarshal(data, &doc)
	for _, v := range slices.Sorted(maps.Keys(doc.Route.Sinks)) {
		var c sink.Config
		if json.Unmarshal(doc.Route.Sinks[v], &c) != nil {
			return "route.sinks." + v + "." + rest
		}
	}
	return path
}
