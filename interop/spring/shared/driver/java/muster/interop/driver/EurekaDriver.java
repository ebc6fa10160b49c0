package muster.interop.driver;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.appinfo.EurekaInstanceConfig;
import com.netflix.appinfo.InstanceInfo;
import com.netflix.appinfo.InstanceInfo.InstanceStatus;
import com.netflix.appinfo.MyDataCenterInstanceConfig;
import com.netflix.appinfo.providers.EurekaConfigBasedInstanceInfoProvider;
import com.netflix.config.ConfigurationManager;
import com.netflix.discovery.DefaultEurekaClientConfig;
import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.shared.Application;
import com.netflix.discovery.converters.wrappers.CodecWrappers;
import com.netflix.discovery.shared.Applications;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.GZIPInputStream;

/**
 * A long-running DiscoveryClient of Netflix's eureka-client, without Spring, that the interop tests in
 * interop/spring steer over its own HTTP port with the same /control API as the Spring apps
 * (ControlController there): GET /control/state, POST /control/status and /control/metadata. It takes
 * the Spring apps' command-line settings that mean something here (the application name, the instance
 * id, the service URLs, metadata) and maps them onto eureka-client's own properties. SIGTERM shuts
 * the client down, which cancels its registration. --archaius.KEY=VALUE sets any eureka-client property
 * (eureka.clientDataAccept=compact, say). GET /control/decode fetches the registry itself and decodes it
 * with one of eureka-client's codecs (CodecWrappers), as a client configured with that codec would.
 */
public class EurekaDriver {
    static class LoopbackInstanceConfig extends MyDataCenterInstanceConfig {
        @Override public String getHostName(boolean refresh) { return "127.0.0.1"; }
        @Override public String getIpAddress() { return "127.0.0.1"; }
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> o = new LinkedHashMap<>();
        for (String a : argv) {
            int eq = a.indexOf('=');
            if (!a.startsWith("--") || eq < 0) throw new IllegalArgumentException("want --key=value, got " + a);
            o.put(a.substring(2, eq), a.substring(eq + 1));
        }
        Transport.init();
        String app = o.get("spring.application.name").toUpperCase();
        String id = o.get("eureka.instance.instance-id");

        // The app's own port is the one it registers, as a Spring app's is.
        HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        int port = http.getAddress().getPort();

        Map<String, String> p = new LinkedHashMap<>();
        p.put("eureka.region", "default");
        p.put("eureka.serviceUrl.default", o.get("eureka.client.service-url.defaultZone"));
        p.put("eureka.shouldUseDns", "false");
        p.put("eureka.registration.enabled", "true");
        p.put("eureka.shouldFetchRegistry", "true");
        p.put("eureka.client.refresh.interval", "1");
        p.put("eureka.appinfo.replicate.interval", "1");
        p.put("eureka.appinfo.initial.replicate.time", "1");
        p.put("eureka.shouldOnDemandUpdateStatusChange", "true");
        p.put("eureka.shouldFilterOnlyUpInstances", "false");
        p.put("eureka.eurekaServer.connectTimeout", "2");
        p.put("eureka.eurekaServer.readTimeout", "5");
        p.put("eureka.name", app);
        p.put("eureka.instanceId", id);
        p.put("eureka.port", String.valueOf(port));
        p.put("eureka.vipAddress", app.toLowerCase());
        p.put("eureka.lease.renewalInterval", "1");
        p.put("eureka.lease.duration", "3");
        for (Map.Entry<String, String> e : o.entrySet()) {
            if (e.getKey().startsWith("archaius.")) {
                p.put(e.getKey().substring("archaius.".length()), e.getValue());
            }
            if (e.getKey().startsWith("eureka.instance.metadata-map.")) {
                p.put("eureka.metadata." + e.getKey().substring("eureka.instance.metadata-map.".length()), e.getValue());
            }
        }
        p.forEach((k, v) -> ConfigurationManager.getConfigInstance().setProperty(k, v));

        EurekaInstanceConfig ic = new LoopbackInstanceConfig();
        InstanceInfo me = new EurekaConfigBasedInstanceInfoProvider(ic).get();
        ApplicationInfoManager aim = new ApplicationInfoManager(ic, me);
        DiscoveryClient client = Transport.newClient(aim, new DefaultEurekaClientConfig());
        aim.setInstanceStatus(InstanceStatus.UP);
        Runtime.getRuntime().addShutdownHook(new Thread(client::shutdown));

        http.createContext("/control/state", ex -> reply(ex, 200, state(client, aim)));
        http.createContext("/control/status", ex -> {
            aim.setInstanceStatus(InstanceStatus.valueOf(query(ex).get("value")));
            reply(ex, 200, "\"ok\"");
        });
        http.createContext("/control/metadata", ex -> {
            Map<String, String> q = query(ex);
            aim.registerAppMetadata(Collections.singletonMap(q.get("key"), q.get("value")));
            reply(ex, 200, "\"ok\"");
        });
        String serviceUrl = o.get("eureka.client.service-url.defaultZone").split(",")[0];
        http.createContext("/control/decode", ex -> {
            try {
                reply(ex, 200, decode(serviceUrl, query(ex), app, id));
            } catch (Exception e) {
                reply(ex, 500, str(e.toString()));
            }
        });
        http.start();
        System.out.println("MUSTER-READY port=" + port + " id=" + id + " transport=" + Transport.NAME);
        System.out.flush();
    }

    static String state(DiscoveryClient client, ApplicationInfoManager aim) {
        StringBuilder b = new StringBuilder("{");
        b.append("\"self\":").append(str(aim.getInfo().getInstanceId()));
        b.append(",\"reregister\":").append(counter(client, "REREGISTER_COUNTER"));
        b.append(",\"mismatches\":").append(counter(client, "RECONCILE_HASH_CODES_MISMATCH"));
        Applications apps = client.getApplications();
        b.append(",\"appsHashCode\":").append(apps == null ? "null" : str(apps.getAppsHashCode()));
        b.append(",\"instances\":[");
        boolean first = true;
        if (apps != null) {
            for (Application a : apps.getRegisteredApplications()) {
                for (InstanceInfo i : a.getInstancesAsIsFromEureka()) {
                    if (!first) b.append(',');
                    first = false;
                    b.append("{\"app\":").append(str(i.getAppName()))
                            .append(",\"id\":").append(str(i.getInstanceId()))
                            .append(",\"status\":").append(str(String.valueOf(i.getStatus())))
                            .append(",\"overridden\":").append(str(String.valueOf(i.getOverriddenStatus())))
                            .append(",\"port\":").append(i.getPort())
                            .append(",\"metadata\":{");
                    boolean firstMeta = true;
                    for (Map.Entry<String, String> m : new TreeMap<>(i.getMetadata()).entrySet()) {
                        if (!firstMeta) b.append(',');
                        firstMeta = false;
                        b.append(str(m.getKey())).append(':').append(str(m.getValue()));
                    }
                    b.append("}}");
                }
            }
        }
        return b.append("]}").toString();
    }

    /**
     * GET {serviceUrl}apps/ (or apps/delta) with the given Accept and, when asked, gzip; the answer
     * decoded with the named codec, and what the decoded registry holds of this instance.
     */
    static String decode(String serviceUrl, Map<String, String> q, String app, String id) throws Exception {
        boolean gzip = Boolean.parseBoolean(q.get("gzip"));
        HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(serviceUrl + q.getOrDefault("path", "apps/")))
                .header("Accept", q.get("accept"));
        if (gzip) req.header("Accept-Encoding", "gzip");
        HttpResponse<InputStream> resp = HttpClient.newHttpClient().send(req.build(), HttpResponse.BodyHandlers.ofInputStream());
        String encoding = resp.headers().firstValue("Content-Encoding").orElse("");
        InputStream body = resp.body();
        if (encoding.equalsIgnoreCase("gzip")) body = new GZIPInputStream(body);
        String text = new String(body.readAllBytes(), StandardCharsets.UTF_8);
        Applications apps = CodecWrappers.getCodec(q.get("codec")).decode(text, Applications.class);
        StringBuilder b = new StringBuilder("{");
        b.append("\"code\":").append(resp.statusCode());
        b.append(",\"contentType\":").append(str(resp.headers().firstValue("Content-Type").orElse("")));
        b.append(",\"encoding\":").append(str(encoding));
        b.append(",\"hashcode\":").append(str(apps.getAppsHashCode()));
        int n = 0;
        InstanceInfo self = null;
        for (Application a : apps.getRegisteredApplications()) {
            for (InstanceInfo i : a.getInstancesAsIsFromEureka()) {
                n++;
                if (app.equals(i.getAppName()) && id.equals(i.getInstanceId())) self = i;
            }
        }
        b.append(",\"instances\":").append(n);
        if (self != null) {
            b.append(",\"selfStatus\":").append(str(String.valueOf(self.getStatus())));
            b.append(",\"selfPort\":").append(self.getPort());
            b.append(",\"selfTeam\":").append(str(self.getMetadata().get("team")));
        }
        return b.append('}').toString();
    }

    /** A counter of DiscoveryClient's (Spectator's in 2.0, Servo's in 1.x), -1 where it cannot be read. */
    static long counter(DiscoveryClient client, String name) {
        try {
            Field f = DiscoveryClient.class.getDeclaredField(name);
            f.setAccessible(true);
            Object c = f.get(client);
            for (String m : new String[] {"count", "getValue"}) {
                try {
                    return ((Number) c.getClass().getMethod(m).invoke(c)).longValue();
                } catch (NoSuchMethodException e) {
                    // the other library's name
                }
            }
            return -1;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return -1;
        }
    }

    static String str(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static Map<String, String> query(HttpExchange ex) {
        Map<String, String> q = new LinkedHashMap<>();
        String raw = ex.getRequestURI().getRawQuery();
        if (raw == null) return q;
        for (String kv : raw.split("&")) {
            int eq = kv.indexOf('=');
            if (eq > 0) q.put(URLDecoder.decode(kv.substring(0, eq), StandardCharsets.UTF_8),
                    URLDecoder.decode(kv.substring(eq + 1), StandardCharsets.UTF_8));
        }
        return q;
    }

    static void reply(HttpExchange ex, int code, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(code, b.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(b);
        }
    }
}
