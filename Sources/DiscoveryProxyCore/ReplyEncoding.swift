// Replies on the wire (RFC 1035, RFC 6891): the reply's skeleton, size limits by transport,
// truncation.
import DNSWire

extension ProxyStateMachine {
    /// A reply's skeleton: the query's ID, question and RD bit, the response code, and an OPT
    /// record when the query had one.
    static func replyHeader(to query: Message, code: ResponseCode) -> Message {
        var header = Header(id: query.header.id)
        header.isResponse = true
        header.opcode = query.header.opcode
        header.recursionDesired = query.header.recursionDesired
        // CD is copied (RFC 4035 §3.1.6), though the proxy does no DNSSEC.
        header.flags |= query.header.flags & 0x0010
        header.responseCode = UInt8(code.rawValue & 0xF)
        // The question is echoed when there is one question; a message with several gets none
        // back (it is refused or malformed anyway), so a reply never outgrows its question.
        var reply = Message(header: header, questions: code == .formatError || query.questions.count != 1 ? [] : query.questions)
        if query.optRecord != nil {
            let extended = UInt32(code.rawValue >> 4) << 24
            reply.additionals = [ResourceRecord(name: .root, data: .opt([]), ttl: extended, class: RecordClass(Message.ednsPayloadSize))]
        }
        return reply
    }

    /// The answer's size limit over `transport` for `query`: 512 bytes over UDP without
    /// EDNS(0), the client's offer with it (at most ``Configuration/maximumUDPPayload``),
    /// 65,535 over TCP.
    func sizeLimit(for query: Message, transport: Transport) -> Int {
        switch transport {
        case .tcp: return Int(UInt16.max)
        case .udp:
            guard let opt = query.optRecord else { return 512 }
            return min(max(512, Int(opt.class.rawValue)), configuration.maximumUDPPayload)
        }
    }

    mutating func encode(_ reply: Message, for query: Message, transport: Transport) -> [UInt8] {
        encode(reply, limit: sizeLimit(for: query, transport: transport))
    }

    /// Encodes `reply` within `limit` bytes: first whole; then without the additional records
    /// (but the OPT record); then with the TC bit and no records at all, so the client asks
    /// again over TCP.
    mutating func encode(_ reply: Message, limit: Int) -> [UInt8] {
        if let bytes = try? reply.encoded(), bytes.count <= limit { return bytes }
        var smaller = reply
        smaller.additionals = reply.additionals.filter { $0.type == .opt }
        if let bytes = try? smaller.encoded(), bytes.count <= limit { return bytes }
        statistics.truncated += 1
        smaller.answers = []
        smaller.authorities = []
        smaller.header.isTruncated = true
        if let bytes = try? smaller.encoded(), bytes.count <= limit { return bytes }
        smaller.questions = []
        smaller.additionals = []
        return (try? smaller.encoded()) ?? []
    }
}

extension RecordData {
    /// An order for records of one type, so that answers come out the same every time.
    var sortKey: String {
        switch self {
        case .a(let address): address.description
        case .aaaa(let address): address.description
        case .ptr(let name), .cname(let name), .ns(let name): name.description
        case .srv(let srv): "\(srv.priority) \(srv.weight) \(srv.port) \(srv.target)"
        case .txt(let txt): txt.rdata.map { String($0) }.joined(separator: ",")
        default: "\(self)"
        }
    }
}
