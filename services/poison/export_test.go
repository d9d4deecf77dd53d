package poison

// NamedIn is namedIn, for TestNamedIn.
var NamedIn = namedIn

// NamesOther is namesOther, for TestNamesOther.
var NamesOther = namesOther
