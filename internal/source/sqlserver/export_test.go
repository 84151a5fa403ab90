package sqlserver

// BuildCTQueries renders the changetracking cursor's SQL, for its golden test.
var BuildCTQueries = buildCTQueries
