package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"lifeline/models"
)

// BenchmarkStatementsPerStep counts the SQL statements the engine sends through GORM per
// step of an eight-step no-op execution on SQLite (River's own statements are not counted):
// the step path must not grow it (issue 20: "the statements per step it has now or fewer").
func BenchmarkStatementsPerStep(b *testing.B) {
	s := newBenchStack(b, models.SQLite, noopDef())
	var n atomic.Int64
	count := func(*gorm.DB) { n.Add(1) }
	cb := s.db.Conn(context.Background()).Callback()
	for name, err := range map[string]error{
		"create": cb.Create().After("gorm:create").Register("bench:count", count),
		"query":  cb.Query().After("gorm:query").Register("bench:count", count),
		"update": cb.Update().After("gorm:update").Register("bench:count", count),
		"delete": cb.Delete().After("gorm:delete").Register("bench:count", count),
		"row":    cb.Row().After("gorm:row").Register("bench:count", count),
		"raw":    cb.Raw().After("gorm:raw").Register("bench:count", count),
	} {
		if err != nil {
			b.Fatal(name, err)
		}
	}
	const execs = 50
	b.ResetTimer()
	for range b.N {
		ids := s.startMany(b, execs)
		s.waitAll(b, ids)
	}
	b.StopTimer()
	// waitAll's own polling is a handful of queries; it is included and negligible.
	b.ReportMetric(float64(n.Load())/float64(b.N*execs*noopSteps), "stmts/step")
}
