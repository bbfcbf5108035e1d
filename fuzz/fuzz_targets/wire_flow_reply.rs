//! bloatlab flow query reply (and query): parsing never panics; a parsed reply
//! emits back to its 64 bytes when it is canonical (a summary only with status
//! found, reserved bits zero), and parse(emit(r)) == r always; the query's
//! streaming helper agrees with its parser.
#![no_main]

use bloatlab_wire::flow_query::{
    FlowQuery, FlowQueryRepr, FlowReply, FlowReplyRepr, REPLY_LEN, query_bytes_needed,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = FlowReplyRepr::parse(&FlowReply::new_unchecked(data)) {
        let out = r.to_bytes();
        assert_eq!(out.len(), REPLY_LEN);
        assert_eq!(FlowReplyRepr::parse(&FlowReply::new_unchecked(&out[..])), Ok(r));
    }
    let needed = query_bytes_needed(data);
    if let Ok(q) = FlowQueryRepr::parse(&FlowQuery::new_unchecked(data)) {
        assert_eq!(needed, Ok(0));
        let out = q.to_vec().unwrap();
        assert_eq!(&data[..out.len()], &out[..]);
    }
});
