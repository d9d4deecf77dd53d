package poison

// NamedIn is namedIn, for TestNamedIn.
var NamedIn = namedIn
