#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON-RPC 2.0 request id: a string or an integer.
public enum JSONRPCID: Hashable, Sendable, CustomStringConvertible {
    case integer(Int)
    case string(String)

    public var description: String {
        switch self {
        case .integer(let value): String(value)
        case .string(let value): JSONValue.string(value).jsonText
        }
    }

    package var json: JSONValue {
        switch self {
        case .integer(let value): .integer(value)
        case .string(let value): .string(value)
        }
    }
}

/// A JSON-RPC 2.0 error object, and the error thrown when a call fails with one.
public struct JSONRPCError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error's number. The standard ones and Nearby's own are named below.
    public var code: Int
    /// One sentence saying what went wrong.
    public var message: String
    /// Anything more the other side sent with it.
    public var data: JSONValue?

    public init(_ code: Int, _ message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public var description: String { "JSON-RPC error \(code): \(message)" }

    /// -32700: the text was not JSON.
    public static let parseError = -32700
    /// -32600: JSON, but not a JSON-RPC 2.0 request, notification or response.
    public static let invalidRequest = -32600
    /// -32601: no such method here.
    public static let methodNotFound = -32601
    /// -32602: the method exists, its params do not fit it.
    public static let invalidParams = -32602
    /// -32603: the receiver failed while handling the request.
    public static let internalError = -32603
    /// -32001 (Nearby): the peers' protocol versions are not compatible.
    public static let incompatibleVersion = -32001
    /// -32002 (Nearby): a request came before `initialize` completed.
    public static let notInitialized = -32002
    /// -32003 (Nearby): the accepting side declined the connection.
    public static let declined = -32003
    /// -32004 (Nearby): pairing refused or failed: not offered here, too many failed
    /// attempts, another pairing in progress, or a reveal that does not match its commitment.
    public static let pairingFailed = -32004
    /// -32005 (Nearby): an invitation was refused; `data.reason` says why (``InvitationRefusal/Kind``:
    /// unknown, expired, usedUp, void, wrongProof, notOffered).
    public static let invitationRefused = -32005
}

/// One JSON-RPC 2.0 message.
public enum JSONRPCMessage: Hashable, Sendable {
    /// A call that expects a response with the same id.
    case request(id: JSONRPCID, method: String, params: JSONValue?)
    /// A call that expects none.
    case notification(method: String, params: JSONValue?)
    /// A successful response.
    case response(id: JSONRPCID, result: JSONValue)
    /// A failed one; the id is nil when the request's id could not be read (a parse error).
    case failure(id: JSONRPCID?, JSONRPCError)

    /// The message as a JSON value, ready to be written as one text frame.
    public var json: JSONValue {
        var members: [String: JSONValue] = ["jsonrpc": .string("2.0")]
        switch self {
        case .request(let id, let method, let params):
            members["id"] = id.json
            members["method"] = .string(method)
            if let params { members["params"] = params }
        case .notification(let method, let params):
            members["method"] = .string(method)
            if let params { members["params"] = params }
        case .response(let id, let result):
            members["id"] = id.json
            members["result"] = result
        case .failure(let id, let error):
            members["id"] = id?.json ?? .null
            var object: [String: JSONValue] = ["code": .integer(error.code), "message": .string(error.message)]
            if let data = error.data { object["data"] = data }
            members["error"] = .object(object)
        }
        return .object(members)
    }

    /// The message as compact JSON text.
    public var jsonText: String { json.jsonText }
}

/// What one text frame held, message by message: the messages to act on, and for each entry
/// that was not a valid message the error response owed to the sender (JSON-RPC 2.0 §5, §6).
public struct JSONRPCFrame: Hashable, Sendable {
    /// One entry of the frame, in order.
    public enum Entry: Hashable, Sendable {
        /// A valid message.
        case message(JSONRPCMessage)
        /// An invalid one, with the error response owed for it (never for a notification).
        case invalid(JSONRPCMessage)
    }

    /// The entries, in the order they came.
    public var entries: [Entry]
    /// Whether the frame was an array (a batch): the responses owed for it go back as one array.
    public var isBatch: Bool

    /// Reads one frame's text. Never throws: text that is not JSON, an empty batch or an
    /// object that is not JSON-RPC 2.0 gives the error response the specification asks for.
    public init(parsing text: some StringProtocol) {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: text)
        } catch {
            self.init(entries: [.invalid(.failure(id: nil, error))], isBatch: false)
            return
        }
        switch value {
        case .array(let elements):
            guard !elements.isEmpty else {
                self.init(entries: [.invalid(.failure(id: nil, JSONRPCError(JSONRPCError.invalidRequest, "an empty batch")))], isBatch: false)
                return
            }
            self.init(entries: elements.map(Self.entry), isBatch: true)
        default:
            self.init(entries: [Self.entry(value)], isBatch: false)
        }
    }

    package init(entries: [Entry], isBatch: Bool) {
        self.entries = entries
        self.isBatch = isBatch
    }

    /// The valid messages of the frame.
    public var messages: [JSONRPCMessage] {
        entries.compactMap { if case .message(let message) = $0 { message } else { nil } }
    }

    /// Checks one value against JSON-RPC 2.0's rules for a request, notification or response.
    package static func entry(_ value: JSONValue) -> Entry {
        func invalid(_ why: String, id: JSONRPCID? = nil) -> Entry {
            .invalid(.failure(id: id, JSONRPCError(JSONRPCError.invalidRequest, why)))
        }
        guard case .object(let members) = value else { return invalid("a JSON-RPC message is an object, not \(value.kindName)") }
        let id: JSONRPCID?
        switch members["id"] {
        case nil, .null?: id = nil
        case .integer(let number)?: id = .integer(number)
        case .string(let text)?: id = .string(text)
        case .number(let number)? where number.rounded() == number && abs(number) < 9e15: id = .integer(Int(number))
        case let other?: return invalid("\"id\" must be a string or an integer, not \(other.kindName)")
        }
        guard members["jsonrpc"] == .string("2.0") else { return invalid("\"jsonrpc\" must be \"2.0\"", id: id) }
        if let method = members["method"] {
            guard case .string(let name) = method else { return invalid("\"method\" must be a string", id: id) }
            let params = members["params"]
            switch params {
            case nil, .array?, .object?: break
            default: return invalid("\"params\" must be an array or an object", id: id)
            }
            if members["id"] == .null { return invalid("a request's \"id\" must not be null") }
            guard let id else { return .message(.notification(method: name, params: params)) }
            return .message(.request(id: id, method: name, params: params))
        }
        switch (members["result"], members["error"]) {
        case (let result?, nil):
            guard let id else { return invalid("a response needs the id of its request") }
            return .message(.response(id: id, result: result))
        case (nil, .object(let error)?):
            guard case .integer(let code)? = error["code"], case .string(let message)? = error["message"] else {
                return invalid("an error needs an integer \"code\" and a string \"message\"", id: id)
            }
            return .message(.failure(id: id, JSONRPCError(code, message, data: error["data"])))
        case (nil, nil):
            return invalid("neither \"method\" nor \"result\" nor \"error\"", id: id)
        default:
            return invalid("a response has exactly one of \"result\" and an \"error\" object", id: id)
        }
    }

}

/// A method answered on the event loop: params in, a result or an error out, at once.
public typealias BuiltInMethod = @Sendable (_ params: JSONValue?) -> Result<JSONValue, JSONRPCError>
