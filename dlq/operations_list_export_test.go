package dlq

// InFlightSQL is the banner's query, for the test that measures it.
const InFlightSQL = inFlightSQL
