#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The operating system's answers about this machine's name and network interfaces, in one
/// place: the discovery modules above ask here instead of calling C themselves.
public enum NetworkPlatform {
    /// This machine's host name as the kernel has it (`buildbox.example.com`), or nil.
    public static func hostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// This machine's host name without a domain (`buildbox` for `buildbox.example.com`), or
    /// nil when it has none.
    public static func hostLabel() -> String? {
        guard let name = hostName() else { return nil }
        let label = name.split(separator: ".").first.map(String.init) ?? ""
        return label.isEmpty ? nil : label
    }

    /// The kernel's index of the interface named `name`, or nil when there is none.
    public static func interfaceIndex(named name: String) -> Int? {
        let index = if_nametoindex(name)
        return index == 0 ? nil : Int(index)
    }

    /// The name of the interface with this index, or "" when there is none.
    public static func interfaceName(index: Int) -> String {
        guard index > 0, index <= Int(UInt32.max) else { return "" }
        var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard if_indextoname(UInt32(index), &buffer) != nil else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Names of the interfaces that are up and running (IFF_UP and IFF_RUNNING).
    public static func runningInterfaceNames() -> Set<String> {
        var names: Set<String> = []
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return names }
        defer { freeifaddrs(list) }
        var cursor = list
        while let entry = cursor {
            let flags = Int32(bitPattern: entry.pointee.ifa_flags)
            if flags & Int32(IFF_UP) != 0 && flags & Int32(IFF_RUNNING) != 0, let name = entry.pointee.ifa_name {
                names.insert(String(cString: name))
            }
            cursor = entry.pointee.ifa_next
        }
        return names
    }
}
