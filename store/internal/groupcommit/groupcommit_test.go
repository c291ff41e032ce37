package groupcommit_test

// The shared layer on a real SQLite database (modernc.org/sqlite): a tiny
// dialect whose jobs insert rows into one table, with real savepoints,
// rollbacks and commits.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/acrelay/acrelay/store/internal/groupcommit"
	"github.com/acrelay/acrelay/store/internal/groupcommit/gctest"
)

// step is what a test job runs on: the batch's transaction and its number.
type step struct {
	tx    *sql.Tx
	batch int
}

type job = groupcommit.Job[*step]

var (
	errClean = errors.New("refused before writing")
	errOwn   = errors.New("failed after writing")
	errFatal = errors.New("the transaction is lost")
)

// dialect is the test's groupcommit.Tx.
type dialect struct {
	s *step
}

func (d *dialect) Exec(run func(*step) error, _ bool) error { return run(d.s) }

func (d *dialect) Own(err error) error {
	if errors.Is(err, errFatal) {
		return nil
	}
	return err
}

func (d *dialect) Clean(err error) bool { return errors.Is(err, errClean) }

func (d *dialect) Savepoint() error {
	_, err := d.s.tx.Exec("SAVEPOINT job")
	return err
}

func (d *dialect) RollbackTo() error {
	if _, err := d.s.tx.Exec("ROLLBACK TO SAVEPOINT job"); err != nil {
		return err
	}
	return d.Release()
}

func (d *dialect) Release() error {
	_, err := d.s.tx.Exec("RELEASE SAVEPOINT job")
	return err
}

// store is the database and a batch runner over it.
type store struct {
	db         *sql.DB
	optimistic bool
	mu         sync.Mutex
	batches    int
	restarts   int
	hold       chan struct{} // when set, the first batch waits for it to close
}

func open(t *testing.T, optimistic bool) *store {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "gc.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE log (key TEXT NOT NULL, n INTEGER NOT NULL, batch INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &store{db: db, optimistic: optimistic}
}

// run runs one batch of entries in one transaction and answers every job,
// as a dialect's batch runner does.
func (s *store) run(_ string, entries []*job) {
	s.mu.Lock()
	s.batches++
	n, hold := s.batches, s.hold
	s.mu.Unlock()
	if n == 1 && hold != nil {
		<-hold
	}
	b, st := s.begin(n)
	for _, e := range entries {
		b.Take(e)
	}
	s.finish(b, st)
}

func (s *store) begin(n int) (*groupcommit.Batch[*step], *step) {
	st := &step{batch: n}
	d := &dialect{s: st}
	var restart func() error
	if s.optimistic {
		restart = func() error {
			s.restarts++
			st.tx.Rollback()
			var err error
			st.tx, err = s.db.Begin()
			return err
		}
	}
	b := groupcommit.NewBatch[*step](d, restart, 8)
	tx, err := s.db.Begin()
	if err != nil {
		b.Fail(err)
	}
	st.tx = tx
	return b, st
}

func (s *store) finish(b *groupcommit.Batch[*step], st *step) {
	if b.Err() == nil {
		if err := st.tx.Commit(); err != nil {
			b.Fail(err)
		}
	}
	if err := b.Err(); err != nil {
		st.tx.Rollback()
		b.Answer(fmt.Errorf("batch failed: %w", err))
		return
	}
	b.Answer(nil)
}

// insert is a job that stores (key, n) with its batch number, then
// returns fail (nil: success).
func insert(key string, n int, fail error) func(*step) error {
	return func(s *step) error {
		if errors.Is(fail, errClean) {
			return fail
		}
		if _, err := s.tx.Exec(`INSERT INTO log (key, n, batch) VALUES (?, ?, ?)`, key, n, s.batch); err != nil {
			return err
		}
		return fail
	}
}

// jobsOf returns a job per fail, the i-th inserting ("p", i+1).
func jobsOf(fails ...error) []*job {
	jobs := make([]*job, len(fails))
	for i, fail := range fails {
		jobs[i] = groupcommit.NewJob(context.Background(), insert("p", i+1, fail))
	}
	return jobs
}

type row struct {
	key      string
	n, batch int
}

// rows lists the stored rows in insertion order.
func (s *store) rows(t *testing.T) []row {
	t.Helper()
	rs, err := s.db.Query(`SELECT key, n, batch FROM log ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.key, &r.n, &r.batch); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A job failing in the middle of a batch gets its own error and nothing of
// it stays; the jobs before and after it commit in the same transaction.
// Optimistic: the batch turns to savepoints (one restart) for it, but not
// for a refusal that wrote nothing.
func TestFailingJobInTheMiddle(t *testing.T) {
	for _, optimistic := range []bool{false, true} {
		t.Run(fmt.Sprint("optimistic=", optimistic), func(t *testing.T) {
			s := open(t, optimistic)
			jobs := jobsOf(nil, errClean, nil, errOwn, nil)
			b, st := s.begin(1)
			for i, j := range jobs {
				b.Take(j)
				if wantGuarded := !optimistic || i >= 3; b.Guarded() != wantGuarded {
					t.Errorf("after job %d: guarded %v, want %v", i, b.Guarded(), wantGuarded)
				}
			}
			if b.Len() != 5 {
				t.Errorf("batch of %d jobs, want 5", b.Len())
			}
			s.finish(b, st)
			want := []error{nil, errClean, nil, errOwn, nil}
			for i, j := range jobs {
				if err := gctest.Answer(t, j); !errors.Is(err, want[i]) || (want[i] == nil && err != nil) {
					t.Errorf("job %d: %v, want %v", i, err, want[i])
				}
			}
			wantRows := []row{{"p", 1, 1}, {"p", 3, 1}, {"p", 5, 1}}
			if got := s.rows(t); !slices.Equal(got, wantRows) {
				t.Errorf("stored %v, want %v", got, wantRows)
			}
			if wantRestarts := map[bool]int{false: 0, true: 1}[optimistic]; s.restarts != wantRestarts {
				t.Errorf("%d restarts, want %d", s.restarts, wantRestarts)
			}
		})
	}
}

// A failure that is not a job's own ends the transaction: later jobs do
// not run, every job not failed on its own gets the cause, jobs taken
// after the failure too, and nothing is committed.
func TestTransactionFailureAnswersEveryJob(t *testing.T) {
	s := open(t, false)
	jobs := jobsOf(nil, errOwn, errFatal, nil)
	b, st := s.begin(1)
	for _, j := range jobs {
		b.Take(j)
	}
	if !errors.Is(b.Err(), errFatal) || b.Len() != 3 {
		t.Fatalf("batch: err %v, %d jobs; want errFatal after 3 jobs", b.Err(), b.Len())
	}
	s.finish(b, st)
	for i, want := range []error{errFatal, errOwn, errFatal, errFatal} {
		if err := gctest.Answer(t, jobs[i]); !errors.Is(err, want) {
			t.Errorf("job %d: %v, want %v", i, err, want)
		}
	}
	if got := s.rows(t); len(got) != 0 {
		t.Errorf("stored %v after a failed transaction", got)
	}
}

// A page is never split between batches, and commits whole in one
// transaction, even past the batch size; each of its jobs has its own
// answer.
func TestPageCommitsWhole(t *testing.T) {
	ctx := context.Background()
	s := open(t, true)
	s.hold = make(chan struct{})
	q := groupcommit.NewQueues(2, s.run)
	first := groupcommit.NewJob(ctx, insert("p", 0, nil))
	q.Push("p", first) // its batch waits on hold: the rest queue behind it
	waitBatches(t, s, 1)
	before := groupcommit.NewJob(ctx, insert("p", 1, nil))
	runs := make([]func(*step) error, 5)
	for i := range runs {
		var fail error
		if i == 2 {
			fail = errOwn
		}
		runs[i] = insert("p", 10+i, fail)
	}
	page := groupcommit.NewPage(ctx, runs)
	after := groupcommit.NewJob(ctx, insert("p", 2, nil))
	q.Push("p", before)
	q.Push("p", page)
	q.Push("p", after)
	close(s.hold)
	errs := page.WaitPage()
	for i, err := range errs {
		if want := map[bool]error{true: errOwn}[i == 2]; !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("page job %d: %v, want %v", i, err, want)
		}
	}
	for _, j := range []*job{first, before, after} {
		if err := gctest.Answer(t, j); err != nil {
			t.Fatal(err)
		}
	}
	want := []row{{"p", 0, 1}, {"p", 1, 2}, {"p", 10, 2}, {"p", 11, 2}, {"p", 13, 2}, {"p", 14, 2}, {"p", 2, 3}}
	if got := s.rows(t); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}

// A submitter whose context ends while its job waits in the queue gets the
// context's error at once; the batch that reaches the job skips it (it
// stores nothing and is answered the same error); a page's unanswered
// jobs get it too.
func TestCancelledWhileWaiting(t *testing.T) {
	s := open(t, true)
	s.hold = make(chan struct{})
	q := groupcommit.NewQueues(8, s.run)
	first := groupcommit.NewJob(context.Background(), insert("p", 0, nil))
	q.Push("p", first)
	waitBatches(t, s, 1)
	cctx, cancel := context.WithCancel(context.Background())
	waiting := groupcommit.NewJob(cctx, insert("p", 1, nil))
	page := groupcommit.NewPage(cctx, []func(*step) error{insert("p", 2, nil), insert("p", 3, nil)})
	later := groupcommit.NewJob(context.Background(), insert("p", 4, nil))
	q.Push("p", waiting)
	q.Push("p", page)
	q.Push("p", later)
	cancel()
	if err := waiting.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("waiting job: %v, want context.Canceled", err)
	}
	for i, err := range page.WaitPage() {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("page job %d: %v, want context.Canceled", i, err)
		}
	}
	close(s.hold)
	if err := gctest.Answer(t, later); err != nil {
		t.Fatal(err)
	}
	if err := gctest.Answer(t, waiting); !errors.Is(err, context.Canceled) {
		t.Errorf("the batch answered the cancelled job %v, want context.Canceled", err)
	}
	want := []row{{"p", 0, 1}, {"p", 4, 2}}
	if got := s.rows(t); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}

// Within a key, jobs run in the order they were pushed, across batches;
// keys run independently.
func TestOrderWithinKey(t *testing.T) {
	ctx := context.Background()
	s := open(t, true)
	q := groupcommit.NewQueues(4, s.run)
	const n = 100
	var jobs []*job
	for i := range n {
		for _, key := range []string{"a", "b"} {
			var j *job
			if i%10 == 9 {
				j = groupcommit.NewPage(ctx, []func(*step) error{insert(key, i*10, nil), insert(key, i*10+1, nil)})
			} else {
				j = groupcommit.NewJob(ctx, insert(key, i*10, nil))
			}
			q.Push(key, j)
			jobs = append(jobs, j)
		}
	}
	for _, j := range jobs {
		if j.Len() == 1 {
			if err := gctest.Answer(t, j); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, err := range j.WaitPage() {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	last := map[string]int{"a": -1, "b": -1}
	count := map[string]int{}
	for _, r := range s.rows(t) {
		if r.n <= last[r.key] {
			t.Fatalf("key %s: %d stored after %d", r.key, r.n, last[r.key])
		}
		last[r.key] = r.n
		count[r.key]++
	}
	if count["a"] != n+n/10 || count["b"] != n+n/10 {
		t.Errorf("stored %v, want %d of each", count, n+n/10)
	}
}

// waitBatches waits until n batches have started.
func waitBatches(t *testing.T, s *store, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		got := s.batches
		s.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches started, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}
