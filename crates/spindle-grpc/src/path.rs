//! [`service_and_method`]: a gRPC path's service and method, for routing, retry policies, call
//! figures and call spans.

/// The service and method of a gRPC path without its leading `/` (`package.Service/Method`):
/// what comes before and after the last `/`. A byte loop from the end: the method name is
/// short, and `rsplit_once` goes through `memrchr`, whose setup costs more than the loop
/// (`docs/perf/grpc.md`, "Header lookups and routing").
pub(crate) fn service_and_method(path: &str) -> Option<(&str, &str)> {
    let slash = path.bytes().rposition(|b| b == b'/')?;
    Some((&path[..slash], &path[slash + 1..]))
}

#[cfg(test)]
mod tests {
    use super::service_and_method;

    #[test]
    fn the_service_is_what_precedes_the_last_slash() {
        assert_eq!(service_and_method("pkg.Svc/Method"), Some(("pkg.Svc", "Method")));
        assert_eq!(service_and_method("a/b/Method"), Some(("a/b", "Method")));
        assert_eq!(service_and_method("pkg.Svc/"), Some(("pkg.Svc", "")));
        assert_eq!(service_and_method("no-slash"), None);
    }
}
