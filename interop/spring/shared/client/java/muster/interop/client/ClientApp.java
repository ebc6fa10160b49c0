package muster.interop.client;

import com.netflix.spectator.api.DefaultRegistry;
import com.netflix.spectator.api.Spectator;
import java.time.Duration;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.context.annotation.Bean;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.web.client.RestTemplate;

/**
 * A Spring Cloud Eureka client app as a team writes one: the starter on the classpath, the Eureka
 * settings in application.properties and on the command line. The interop tests in interop/spring
 * steer it through its own HTTP port: Spring's /actuator/serviceregistry for status overrides, and
 * /control (ControlController) for what the client's registry holds and its counters.
 */
@SpringBootApplication
public class ClientApp {
    public static void main(String[] args) {
        // eureka-client 2.0 counts re-registrations and hashcode mismatches in Spectator's global
        // registry, which holds no registry of its own (its counters stay 0) until one is added.
        Spectator.globalRegistry().add(new DefaultRegistry());
        SpringApplication.run(ClientApp.class, args);
    }

    /**
     * The caller's side of a service call as Spring Cloud documents it: a @LoadBalanced RestTemplate
     * that resolves http://SERVICE/ through Spring Cloud LoadBalancer. Without spring-retry on the
     * classpath it never retries, so every call to a stopped instance is a failed call the test
     * counts. The timeouts are a team's, not the JDK's infinite ones.
     */
    @Bean
    @LoadBalanced
    RestTemplate loadBalancedRestTemplate() {
        SimpleClientHttpRequestFactory factory = new SimpleClientHttpRequestFactory();
        factory.setConnectTimeout(Duration.ofSeconds(2));
        factory.setReadTimeout(Duration.ofSeconds(5));
        return new RestTemplate(factory);
    }
}
