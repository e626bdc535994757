/*
 * Command-line options of the three programs of bench/streams (Dedup,
 * Produce, Watch): `--name value` pairs, each name declared with a default
 * (null: required) and a one-line help, so a typo or a missing value is a
 * clear usage error (exit 2) rather than a silent default.
 */
package org.bloomstage.bench.streams;

import java.util.LinkedHashMap;
import java.util.Map;

final class Opts {
    /** A usage error: the program prints it with its usage and exits 2. */
    static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String msg) {
            super(msg);
        }
    }

    private final String program;
    private final Map<String, String[]> decl = new LinkedHashMap<>(); // name -> {default, help}
    private final Map<String, String> values = new LinkedHashMap<>();

    Opts(String program) {
        this.program = program;
    }

    /** Declares --name; def null means required. */
    Opts opt(String name, String def, String help) {
        decl.put(name, new String[] {def, help});
        return this;
    }

    String usage() {
        StringBuilder sb = new StringBuilder("usage: " + program + " [options]\n");
        for (Map.Entry<String, String[]> e : decl.entrySet()) {
            String def = e.getValue()[0];
            sb.append(String.format("  --%-20s %s%s%n", e.getKey() + " V", e.getValue()[1],
                    def == null ? " (required)" : def.isEmpty() ? "" : " (default " + def + ")"));
        }
        return sb.toString();
    }

    Opts parse(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--help") || a.equals("-h")) {
                System.out.print(usage());
                System.exit(0);
            }
            if (!a.startsWith("--") || !decl.containsKey(a.substring(2))) {
                throw new UsageException("unknown argument '" + a + "'");
            }
            if (i + 1 >= args.length) {
                throw new UsageException(a + " needs a value");
            }
            values.put(a.substring(2), args[++i]);
        }
        for (Map.Entry<String, String[]> e : decl.entrySet()) {
            if (e.getValue()[0] == null && !values.containsKey(e.getKey())) {
                throw new UsageException("--" + e.getKey() + " is required");
            }
        }
        return this;
    }

    String str(String name) {
        String v = values.get(name);
        return v != null ? v : decl.get(name)[0];
    }

    long num(String name, long min, long max) {
        String v = str(name);
        long n;
        try {
            n = Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + ": '" + v + "' is not an integer");
        }
        if (n < min || n > max) {
            throw new UsageException("--" + name + ": " + n + " is not in " + min + ".." + max);
        }
        return n;
    }

    boolean bool(String name) {
        String v = str(name);
        if (v.equals("true")) {
            return true;
        }
        if (v.equals("false")) {
            return false;
        }
        throw new UsageException("--" + name + ": '" + v + "' is not true or false");
    }

    /** A program's body. */
    interface Body {
        void run() throws Exception;
    }

    /**
     * Runs body: a UsageException prints the message and a pointer to
     * --help, exit 2; any other exception prints its stack, exit 1.
     */
    static void main(String program, Body body) {
        try {
            body.run();
        } catch (UsageException e) {
            System.err.println(program + ": " + e.getMessage());
            System.err.println("usage: " + program + " --help");
            System.exit(2);
        } catch (Exception e) {
            System.err.println(program + ": " + e);
            e.printStackTrace();
            System.exit(1);
        }
    }
}
